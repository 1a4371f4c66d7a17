// SPDX-License-Identifier: GPL-2.0-or-later
// The switch's telemetry records as CSV, for tools that want a table
// rather than JSON lines.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace vrnic::fabric {

// The header of a CSV telemetry file: one value per row.
inline constexpr const char *kTelemetryCsvHeader = "t_ns,switch,port,prio,metric,value\n";

// The rows of one record of Fabric::sample() or of
// {"t_ns":..,"counters":Fabric::counters()}, each ending in a newline:
//   a sample:   "t,,,,sample,N" (N queues hold bytes), "t,,,,late_ns,NS"
//               if the switch ran that late, then
//               "t,SW,PORT,PRIO,sampled_depth,BYTES" for each queue;
//   counters:   "t,SW,,,buffer_used,V" and "shared_used" per switch,
//               "t,SW,PORT,,peer,NAME" for every port (what it leads to),
//               "t,SW,PORT,,up,0|1" for a host port,
//               "t,SW,PORT,PRIO,NAME,V" for every counter of a queue
//               (a drop as "drops.CAUSE", only when it is not zero),
//               "t,,,,injection.N.seen|fired,V" for each injection rule.
// A record of neither kind gives "".
std::string telemetry_csv(const nlohmann::json &record);

} // namespace vrnic::fabric
