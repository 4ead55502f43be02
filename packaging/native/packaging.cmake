# Packaging (issue 20): the Debian packages libshardopt2 and libshardopt-dev (cpack, see
# cpack.cmake) and the `packaging` tests, which install each artifact into a clean prefix or an
# empty directory and run a 2-rank program from it.
# Include it at the END of the top-level CMakeLists.txt (after every install() rule and target):
#   include(${PROJECT_SOURCE_DIR}/packaging/native/packaging.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/cpack.cmake)

if(SHARDOPT_BUILD_TESTS)
  # Each test skips (77) with a message when a tool it needs is missing.
  add_test(NAME packaging.debs
           COMMAND bash ${PROJECT_SOURCE_DIR}/packaging/native/test-debs.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(packaging.debs PROPERTIES LABELS packaging TIMEOUT 120 SKIP_RETURN_CODE 77
                       RUN_SERIAL ON)
  add_test(NAME packaging.jar
           COMMAND bash ${PROJECT_SOURCE_DIR}/packaging/java/test-jar.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(packaging.jar PROPERTIES LABELS packaging TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
