# ctest label `packaging` for the managed-language artifacts: the Python wheel and the NuGet
# package. Included from the top-level CMakeLists.txt:
#   include(${PROJECT_SOURCE_DIR}/packaging/managed/packaging.cmake)
# Each test packs its artifact from this build (nothing is recompiled), installs it into a clean
# venv / empty directory under the build tree (never the source tree), and runs 2 ranks from it.
# A test whose tools are missing (nuget, network for the first download of the wheel's
# dependencies) exits 77 and ctest reports it skipped, with the reason in its output.
if(NOT SHARDOPT_BUILD_TESTS OR NOT SHARDOPT_BUILD_BINDINGS)
  return()
endif()
set(SO_PKG_WORK ${PROJECT_BINARY_DIR}/packaging-tests)

if(TARGET shardopt_python)
  add_test(NAME packaging.python_wheel
           COMMAND bash ${PROJECT_SOURCE_DIR}/packaging/python/test-wheel.sh ${PROJECT_BINARY_DIR} ${SO_PKG_WORK}/python)
  set_tests_properties(packaging.python_wheel PROPERTIES LABELS "packaging;python" TIMEOUT 300 SKIP_RETURN_CODE 77
                       RESOURCE_LOCK packaging_tools ENVIRONMENT "PYTHON=${Python3_EXECUTABLE};JOBS=2")
endif()
if(TARGET shardopt_csharp)
  add_test(NAME packaging.nuget
           COMMAND bash ${PROJECT_SOURCE_DIR}/packaging/nuget/test-nupkg.sh ${PROJECT_BINARY_DIR} ${SO_PKG_WORK}/nuget)
  set_tests_properties(packaging.nuget PROPERTIES LABELS "packaging;csharp" TIMEOUT 120 SKIP_RETURN_CODE 77
                       RESOURCE_LOCK packaging_tools ENVIRONMENT "JOBS=2")
endif()
