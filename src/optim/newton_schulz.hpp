// The Newton-Schulz orthogonalization of Muon (torch.optim.Muon's _zeropower_via_newtonschulz),
// over a rows x cols row-major matrix in place, in the matrix's own type (torch runs it in bf16;
// the f64 reference in tests/optim/reference/ runs it in float64):
//   X = G (transposed when rows > cols);  X /= max(|X|_F, eps)
//   repeat steps times:  A = X X^T;  B = b A + c A A;  X = a X + B X
// The arithmetic has one fixed order, so one matrix gives the same bits on any rank.
#pragma once

#include <cstddef>

namespace shardopt {

struct NewtonSchulz {
    int steps = 5;
    double a = 3.4445, b = -4.7750, c = 2.0315;
    double eps = 1e-7;
};

void newton_schulz(float *matrix, std::size_t rows, std::size_t cols, const NewtonSchulz &ns);
void newton_schulz(double *matrix, std::size_t rows, std::size_t cols, const NewtonSchulz &ns);

// Multiply-adds of one orthogonalization (what owners are balanced by).
double newton_schulz_cost(std::size_t rows, std::size_t cols, int steps);

} // namespace shardopt
