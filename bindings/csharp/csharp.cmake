# C#: SWIG P/Invoke module + the Shardopt.DistributedTraining layer, built with mono's mcs into Shardopt.dll,
# tests (plain asserts) and the sample run with mono. Shardopt.csproj is for dotnet users.
set(CS_DIR ${CMAKE_CURRENT_BINARY_DIR}/csharp)
swig_wrap(csharp ${CS_DIR}/gen ${CS_DIR}/shardopt_csharp_wrap.c ${CS_DIR}/swig.stamp
          -namespace Shardopt.Native -dllimport shardopt_csharp)
so_native_module(shardopt_csharp ${CS_DIR}/shardopt_csharp_wrap.c ${CS_DIR})
set_target_properties(shardopt_csharp PROPERTIES OUTPUT_NAME shardopt_csharp)
file(GLOB CS_LAYER CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/csharp/src/*.cs)
add_custom_command(
  OUTPUT ${CS_DIR}/Shardopt.dll
  COMMAND bash -c "${MCS_EXECUTABLE} -nologo -unsafe -target:library -nowarn:1591 -out:${CS_DIR}/Shardopt.dll ${CS_DIR}/gen/*.cs $<JOIN:${CS_LAYER}, >"
  DEPENDS ${CS_DIR}/swig.stamp ${CS_LAYER}
  COMMENT "Shardopt.dll")
add_custom_target(shardopt_csharp_dll ALL DEPENDS ${CS_DIR}/Shardopt.dll shardopt_csharp)
if(SHARDOPT_BUILD_TESTS)
  file(GLOB CS_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/csharp/tests/*.cs)
  add_custom_command(
    OUTPUT ${CS_DIR}/ShardoptTests.exe ${CS_DIR}/FsdpAdam.exe ${CS_DIR}/PortedFsdp.exe
    COMMAND ${MCS_EXECUTABLE} -nologo -unsafe -r:${CS_DIR}/Shardopt.dll -out:${CS_DIR}/ShardoptTests.exe ${CS_TESTS}
    COMMAND ${MCS_EXECUTABLE} -nologo -r:${CS_DIR}/Shardopt.dll -out:${CS_DIR}/FsdpAdam.exe ${PROJECT_SOURCE_DIR}/samples/csharp/FsdpAdam.cs
    COMMAND ${MCS_EXECUTABLE} -nologo -r:${CS_DIR}/Shardopt.dll -out:${CS_DIR}/PortedFsdp.exe ${PROJECT_SOURCE_DIR}/samples/csharp/PortedFsdp.cs
    DEPENDS ${CS_DIR}/Shardopt.dll ${CS_TESTS} ${PROJECT_SOURCE_DIR}/samples/csharp/FsdpAdam.cs ${PROJECT_SOURCE_DIR}/samples/csharp/PortedFsdp.cs
    COMMENT "C# tests and sample")
  add_custom_target(shardopt_csharp_tests ALL DEPENDS ${CS_DIR}/ShardoptTests.exe)
  add_dependencies(shardopt_csharp_tests shardopt_csharp_dll)
  add_test(NAME bindings.csharp COMMAND ${MONO_EXECUTABLE} ${CS_DIR}/ShardoptTests.exe)
  add_test(NAME samples.csharp_fsdp_adam COMMAND ${MONO_EXECUTABLE} ${CS_DIR}/FsdpAdam.exe)
  # issue 19: mistakes raise (safety), ranks that disagree fail everywhere (agreement), the generic/model API (api);
  # issue 23: pipeline stages and runner (pipeline); issue 22: AsyncSGDOptimizer (async); issue 24: ElasticOptimizer (elastic)
  foreach(group safety agreement api pipeline async elastic)
    add_test(NAME bindings.csharp_${group} COMMAND ${MONO_EXECUTABLE} ${CS_DIR}/ShardoptTests.exe --group ${group})
  endforeach()
  # the seed example ported (double, generic): 4 in-memory ranks == 1 process, and == the C++ core bit for bit
  set(CS_REF "")
  if(TARGET bindings_reference_f64)
    set(CS_REF --reference $<TARGET_FILE:bindings_reference_f64>)
  endif()
  add_test(NAME samples.csharp_ported_fsdp COMMAND ${MONO_EXECUTABLE} ${CS_DIR}/PortedFsdp.exe inmemory ${CS_REF})
  add_test(NAME bindings.csharp_f64_reference_shuffled
           COMMAND ${MONO_EXECUTABLE} ${CS_DIR}/PortedFsdp.exe inmemory ${CS_REF} --shuffle-seed 7)
  add_test(NAME samples.csharp_ported_fsdp_ucx
           COMMAND python3 ${SO_RUN} -n 4 --timeout 120 -- ${MONO_EXECUTABLE} ${CS_DIR}/PortedFsdp.exe ucx)
  set_tests_properties(bindings.csharp samples.csharp_fsdp_adam bindings.csharp_safety bindings.csharp_agreement
    bindings.csharp_api bindings.csharp_pipeline bindings.csharp_async bindings.csharp_elastic samples.csharp_ported_fsdp bindings.csharp_f64_reference_shuffled samples.csharp_ported_fsdp_ucx
    PROPERTIES LABELS csharp TIMEOUT 300
    ENVIRONMENT "LD_LIBRARY_PATH=${CS_DIR};SHARDOPT_RUN=${SO_RUN};MONO=${MONO_EXECUTABLE};SHARDOPT_CS_DIR=${CS_DIR}")
endif()
message(STATUS "shardopt bindings: C# (mono)")
