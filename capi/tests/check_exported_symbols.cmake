# Compares the dynamic symbols libshardopt.so defines (nm -D --defined-only), each with its version
# node ("shardopt_barrier@@SHARDOPT_2"; see capi/shardopt.map), with the committed list
# capi/exported_symbols.txt, so an accidental ABI change fails, a function moving between the
# stable and the experimental node included. After an intended change, regenerate the list:
#   cmake -DLIBRARY=libshardopt.so -DEXPECTED=capi/exported_symbols.txt -DUPDATE=ON -P <this>
find_program(NM nm REQUIRED)
execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm -D failed on ${LIBRARY}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(actual "")
foreach(line IN LISTS lines)
  # "<address> <type> <name>@@<version node>"; the nodes themselves are listed as "<0> A <node>"
  if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^ @]+@@?[^ ]+)$")
    list(APPEND actual "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^ @]+)$" AND NOT line MATCHES " A ")
    list(APPEND actual "${CMAKE_MATCH_1}") # an unversioned symbol: shardopt.map lost its nodes
  endif()
endforeach()
list(SORT actual)
list(REMOVE_DUPLICATES actual)
list(JOIN actual "\n" actual_text)
set(actual_text "${actual_text}\n")
if(UPDATE)
  file(WRITE ${EXPECTED} "${actual_text}")
  message(STATUS "wrote ${EXPECTED}")
  return()
endif()
file(READ ${EXPECTED} expected_text)
if(NOT actual_text STREQUAL expected_text)
  string(REPLACE "\n" ";" expected "${expected_text}")
  list(REMOVE_ITEM expected "")
  set(added ${actual})
  list(REMOVE_ITEM added ${expected})
  set(removed ${expected})
  list(REMOVE_ITEM removed ${actual})
  message(FATAL_ERROR "exported symbols differ from ${EXPECTED}\n  added: ${added}\n  removed: ${removed}\n"
                      "(an intended ABI change? regenerate the list with -DUPDATE=ON)")
endif()
list(LENGTH actual n)
message(STATUS "${n} exported symbols match ${EXPECTED}")
