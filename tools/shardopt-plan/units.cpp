#include "units.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace shardopt::plan_tool {
namespace {

// The number at the front of `text`, and the rest (the unit), lower-cased without spaces.
double split(const std::string &text, std::string &unit, const char *what) {
    const char *begin = text.c_str();
    char *end = nullptr;
    const double v = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(v)) throw std::invalid_argument(std::string("not a ") + what + ": '" + text + "'");
    unit.clear();
    for (const char *p = end; *p; ++p)
        if (!std::isspace(static_cast<unsigned char>(*p))) unit += char(std::tolower(static_cast<unsigned char>(*p)));
    return v;
}

double scale_of(const std::string &prefix, bool binary_allowed, bool &binary) {
    binary = false;
    if (prefix.empty()) return 1;
    const std::string p = prefix;
    static const char *letters = "kmgtp";
    for (int i = 0; letters[i]; ++i) {
        if (p == std::string(1, letters[i])) return std::pow(1000.0, i + 1);
        if (binary_allowed && p == std::string(1, letters[i]) + "i") {
            binary = true;
            return std::pow(1024.0, i + 1);
        }
    }
    return -1;
}

} // namespace

double parse_bytes(const std::string &text) {
    std::string unit;
    const double v = split(text, unit, "size");
    if (unit.empty() || unit == "b") return v;
    if (unit.back() == 'b') {
        bool binary = false;
        const double s = scale_of(unit.substr(0, unit.size() - 1), true, binary);
        if (s > 0) return v * s;
    }
    throw std::invalid_argument("not a size: '" + text + "' (a number with B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)");
}

double parse_rate(const std::string &text) {
    std::string lower;
    const double v = split(text, lower, "bandwidth");
    std::string raw; // the unit as written: case tells bytes (B) from bits (b)
    for (std::size_t i = text.find_first_not_of(" 0123456789.+-eE"); i != std::string::npos && i < text.size(); ++i)
        if (!std::isspace(static_cast<unsigned char>(text[i]))) raw += text[i];
    if (raw.empty() && !lower.empty()) raw = lower;
    for (const char *per : {"/s", "ps"})
        if (raw.size() > 2 && raw.compare(raw.size() - 2, 2, per) == 0) raw.resize(raw.size() - 2);
    std::string prefix;
    bool bits = false;
    std::string low = raw;
    std::transform(low.begin(), low.end(), low.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (low.size() >= 3 && low.compare(low.size() - 3, 3, "bit") == 0) {
        bits = true;
        prefix = low.substr(0, low.size() - 3);
    } else if (!raw.empty() && (raw.back() == 'B' || raw.back() == 'b')) {
        bits = raw.back() == 'b';
        prefix = low.substr(0, low.size() - 1);
    } else {
        throw std::invalid_argument("not a bandwidth: '" + text + "' (e.g. 900GB/s, 25GiB/s, 400Gbit/s, 10gbit)");
    }
    bool binary = false;
    const double scale = scale_of(prefix, true, binary);
    if (scale < 0) throw std::invalid_argument("not a bandwidth: '" + text + "' (e.g. 900GB/s, 25GiB/s, 400Gbit/s, 10gbit)");
    return bits ? v * scale / 8.0 : v * scale;
}

double parse_seconds(const std::string &text) {
    std::string unit;
    const double v = split(text, unit, "time");
    if (unit.empty() || unit == "s") return v;
    if (unit == "ms") return v * 1e-3;
    if (unit == "us" || unit == "µs") return v * 1e-6;
    if (unit == "ns") return v * 1e-9;
    if (unit == "min") return v * 60;
    throw std::invalid_argument("not a time: '" + text + "' (a number with s, ms, us or ns)");
}

double parse_count(const std::string &text) {
    std::string unit;
    const double v = split(text, unit, "count");
    if (unit.empty()) return v;
    if (unit == "k") return v * 1e3;
    if (unit == "m") return v * 1e6;
    if (unit == "b" || unit == "g") return v * 1e9;
    if (unit == "t") return v * 1e12;
    throw std::invalid_argument("not a count: '" + text + "' (e.g. 7e9, 7B, 350M)");
}

std::string bytes_text(double b) {
    char out[32];
    if (b >= 1e12) std::snprintf(out, sizeof out, "%.2f TB", b / 1e12);
    else if (b >= 1e9) std::snprintf(out, sizeof out, "%.2f GB", b / 1e9);
    else if (b >= 1e6) std::snprintf(out, sizeof out, "%.1f MB", b / 1e6);
    else if (b >= 1e3) std::snprintf(out, sizeof out, "%.1f KB", b / 1e3);
    else std::snprintf(out, sizeof out, "%.0f B", b);
    return out;
}

std::string rate_text(double r) { return bytes_text(r) + "/s"; }

std::string seconds_text(double s) {
    char out[32];
    if (s >= 1) std::snprintf(out, sizeof out, "%.3f s", s);
    else if (s >= 1e-3) std::snprintf(out, sizeof out, "%.2f ms", s * 1e3);
    else std::snprintf(out, sizeof out, "%.1f us", s * 1e6);
    return out;
}

} // namespace shardopt::plan_tool
