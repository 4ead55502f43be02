// Quantities on shardopt-plan's command line: "80GiB", "900GB/s", "400Gbit/s", "5us", "7e9", "70B".
#pragma once

#include <string>

namespace shardopt::plan_tool {

// Bytes: a number with an optional unit B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB.
double parse_bytes(const std::string &text);
// Bytes per second: bytes per second ("900GB/s", "25GiB/s") or bits ("400Gbit/s", "400Gb/s",
// "10gbit", "100Mbit/s").
double parse_rate(const std::string &text);
// Seconds: "5us", "2ms", "1.5s", "30ns", or a plain number of seconds.
double parse_seconds(const std::string &text);
// A count: "7e9", "7000000000", "7B" (billion), "350M", "1.5T".
double parse_count(const std::string &text);

// For reports: "80.0 GB", "1.25 GB/s", "3.2 ms".
std::string bytes_text(double bytes);
std::string rate_text(double bytes_per_second);
std::string seconds_text(double seconds);

} // namespace shardopt::plan_tool
