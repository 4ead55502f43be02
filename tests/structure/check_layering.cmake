# The folders of src/ depend on each other in one direction only (DESIGN.md, "Layers";
# docs/layout.md draws them). Run as
#   cmake -DROOT=<source dir> -P check_layering.cmake
# and it fails naming every include that breaks a rule, and every folder of src/ that has no
# layer yet.
#
# The layers, lowest first. A file may include headers of its own folder and of the folders of
# lower layers; never of a higher layer, nor of another folder of its own layer.
cmake_policy(SET CMP0057 NEW) # if(IN_LIST)
set(layers
  # the CUDA helpers sit below everything that uses them
  "cuda"
  # communicators (they know nothing of optimizers); update rules and the CPU kernels (they run on
  # any buffer, never on a communicator); the parameter layout and what a rank owns of it
  "comm optim params"
  # every part of checkpoints: the format, and the operations over what they need of an optimizer
  # (CheckpointTarget); the training loop's parts, over what it needs of one (Trainee). Neither
  # knows the optimizers that implement those, nor the other.
  "checkpoint training"
  # ShardedOptimizer and the interface of its backends, the step engine, the strategies as plans
  "sharding"
  # asynchronous SGD, a backend built on the sharding pieces (never the other way round);
  # pipeline schedules and their runner
  "async pipeline"
  # the elastic schedule sits on ShardedOptimizer's public interface, nothing under it; the test
  # build's hooks; the planner (models every strategy, the pipeline schedules and the collectives)
  "elastic test_hooks planner")

# Public headers (include/shardopt) that a folder implements count as that folder's: a lower one
# may not include them either. The others (types, errors, the options of sharded_optimizer.hpp and
# async_checkpoint.hpp) are the vocabulary every layer shares.
set(public_homes
  "work.hpp=comm" "ucx.hpp=comm" "gpu_comm.hpp=comm" "inprocess.hpp=comm" "bootstrap.hpp=comm" "half.hpp=comm"
  "device_optimizer.hpp=optim" "batch_split.hpp=training" "compression.hpp=sharding" "async_sgd.hpp=async"
  "pipeline.hpp=pipeline" "pipeline_schedule.hpp=pipeline" "elastic.hpp=elastic" "planner.hpp=planner")
foreach(entry ${public_homes})
  string(REPLACE "=" ";" pair "${entry}")
  list(GET pair 0 header)
  list(GET pair 1 folder)
  set(home_of_${header} ${folder})
endforeach()

set(rank 0)
set(known "")
foreach(layer ${layers})
  string(REPLACE " " ";" folders "${layer}")
  foreach(folder ${folders})
    set(layer_of_${folder} ${rank})
    list(APPEND known ${folder})
  endforeach()
  math(EXPR rank "${rank} + 1")
endforeach()

set(broken "")
file(GLOB children RELATIVE "${ROOT}/src" "${ROOT}/src/*")
foreach(child ${children})
  if(IS_DIRECTORY "${ROOT}/src/${child}" AND NOT child IN_LIST known)
    list(APPEND broken "src/${child}/ has no layer: give it one in tests/structure/check_layering.cmake")
  endif()
endforeach()

# An include "x" names a file of src/ relative to the including file, or relative to src/.
file(GLOB_RECURSE sources RELATIVE "${ROOT}/src" "${ROOT}/src/*.cpp" "${ROOT}/src/*.hpp" "${ROOT}/src/*.cu"
     "${ROOT}/src/*.cuh")
foreach(source ${sources})
  string(REGEX REPLACE "/.*" "" from "${source}")
  if(NOT DEFINED layer_of_${from})
    continue() # a file directly in src/
  endif()
  get_filename_component(dir "${source}" DIRECTORY)
  file(STRINGS "${ROOT}/src/${source}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
  foreach(line ${includes})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*$" "\\1" inc "${line}")
    set(target "")
    if(inc MATCHES "^shardopt/([^/]+)$")
      set(header "${CMAKE_MATCH_1}")
      if(DEFINED home_of_${header})
        set(target "${home_of_${header}}/ (public ${inc})")
      endif()
    endif()
    foreach(candidate "${dir}/${inc}" "${inc}")
      if(NOT target STREQUAL "")
        break()
      endif()
      cmake_path(NORMAL_PATH candidate)
      if(EXISTS "${ROOT}/src/${candidate}" AND NOT candidate MATCHES "^\\.\\./")
        set(target "${candidate}")
        break()
      endif()
    endforeach()
    if(target STREQUAL "")
      continue() # a public header (include/shardopt) or a system one
    endif()
    string(REGEX REPLACE "/.*" "" to "${target}")
    if(to STREQUAL from OR NOT DEFINED layer_of_${to})
      continue()
    endif()
    if(NOT layer_of_${to} LESS layer_of_${from})
      list(APPEND broken "src/${source}: ${line} (src/${from} may not depend on src/${to})")
    endif()
  endforeach()
endforeach()
if(broken)
  list(JOIN broken "\n  " text)
  message(FATAL_ERROR "layering: includes against the direction of the layers:\n  ${text}")
endif()
message(STATUS "layering: no include breaks a rule")
