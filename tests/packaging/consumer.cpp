#include <shardopt/inprocess.hpp>
#include <cstdio>
int main(){ shardopt::run_inprocess(3,[](shardopt::Communicator&c){ int v=c.rank(); c.allreduce(&v,1,shardopt::ReduceOp::sum); if(c.rank()==0) std::printf("sum=%d\n",v);}); }
