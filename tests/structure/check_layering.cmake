# The folders of src/ depend on each other in one direction only (DESIGN.md, "Layers"): a file of
# FROM may not include a header of TO for each pair below. Run as
#   cmake -DROOT=<source dir> -P check_layering.cmake
# and it fails naming every include that breaks a rule.
set(rules
  "comm:optim"      # the communicators know nothing of optimizers (CUDA helpers live in src/cuda)
  "optim:comm"      # update rules run on any buffer, never on a communicator
  "cuda:comm"       # the CUDA helpers sit below everything that uses them
  "cuda:optim"
  "cuda:sharding"
  "comm:sharding"
  "optim:sharding"
  "comm:async"      # asynchronous SGD (src/async) is built on the communicators and the sharding pieces,
  "optim:async"     # never the other way round
  "sharding:async"
  "sharding:elastic"  # the elastic schedule sits on ShardedOptimizer's public interface, nothing under it
  "checkpoint:elastic"
  "comm:elastic")
set(broken "")
foreach(rule ${rules})
  string(REPLACE ":" ";" pair "${rule}")
  list(GET pair 0 from)
  list(GET pair 1 to)
  file(GLOB_RECURSE sources "${ROOT}/src/${from}/*.cpp" "${ROOT}/src/${from}/*.hpp" "${ROOT}/src/${from}/*.cu"
       "${ROOT}/src/${from}/*.cuh")
  foreach(source ${sources})
    # "to/x.hpp" from src/ or "../to/x.hpp", "../../to/x.hpp" relative to the file
    file(STRINGS "${source}" includes REGEX "^#include \"(\\.\\./)*${to}/")
    foreach(line ${includes})
      file(RELATIVE_PATH where "${ROOT}" "${source}")
      list(APPEND broken "${where}: ${line} (src/${from} may not depend on src/${to})")
    endforeach()
  endforeach()
endforeach()
if(broken)
  list(JOIN broken "\n  " text)
  message(FATAL_ERROR "layering: includes against the direction of the layers:\n  ${text}")
endif()
message(STATUS "layering: no include breaks a rule")
