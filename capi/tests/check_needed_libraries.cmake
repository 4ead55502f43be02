# Fails when the shared library LIBRARY depends (an ELF NEEDED entry, read with readelf -d or
# objdump -p) on a library whose name matches the regex FORBIDDEN. libshardopt.so must not need
# libnccl: the NCCL backend opens it at run time, so hosts without NCCL can still load shardopt.
#   cmake -DLIBRARY=libshardopt.so -DFORBIDDEN=libnccl -P <this>
find_program(READELF readelf)
find_program(OBJDUMP objdump)
if(READELF)
  execute_process(COMMAND ${READELF} -d ${LIBRARY} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  set(pattern "\\(NEEDED\\)[^[]*\\[([^]]+)\\]") # " 0x1 (NEEDED)  Shared library: [libc.so.6]"
elseif(OBJDUMP)
  execute_process(COMMAND ${OBJDUMP} -p ${LIBRARY} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  set(pattern "^ *NEEDED +([^ ]+)") # "  NEEDED               libc.so.6"
else()
  message(FATAL_ERROR "neither readelf nor objdump was found")
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "could not read the dynamic section of ${LIBRARY}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(needed "")
foreach(line IN LISTS lines)
  if(line MATCHES "${pattern}")
    list(APPEND needed "${CMAKE_MATCH_1}")
  endif()
endforeach()
if(NOT needed) # every shared library here needs at least libc: the output was not understood
  message(FATAL_ERROR "found no NEEDED entries in ${LIBRARY}:\n${out}")
endif()
set(bad ${needed})
list(FILTER bad INCLUDE REGEX "${FORBIDDEN}")
if(bad)
  message(FATAL_ERROR "${LIBRARY} needs ${bad} at load time (NEEDED entries: ${needed}); it must not "
                      "(a library matching '${FORBIDDEN}' is opened at run time, never linked)")
endif()
message(STATUS "${LIBRARY} needs ${needed}: none matches '${FORBIDDEN}'")
