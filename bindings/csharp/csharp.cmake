# C#: SWIG P/Invoke module + the Shardopt.DistributedTraining layer, built with mono's mcs into Shardopt.dll,
# tests (plain asserts), the samples and the conformance driver run with mono. Shardopt.csproj is for dotnet users.
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
  set(CS_SAMPLES ${PROJECT_SOURCE_DIR}/samples/csharp)
  set(CS_CONFORMANCE ${PROJECT_SOURCE_DIR}/tests/bindings/conformance/conformance_csharp.cs)
  file(GLOB CS_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/csharp/tests/*.cs)
  add_custom_command(
    OUTPUT ${CS_DIR}/ShardoptTests.exe ${CS_DIR}/FsdpAdam.exe ${CS_DIR}/PortedFsdp.exe ${CS_DIR}/conformance_csharp.exe
    COMMAND ${MCS_EXECUTABLE} -nologo -unsafe -r:${CS_DIR}/Shardopt.dll -out:${CS_DIR}/ShardoptTests.exe ${CS_TESTS} ${CS_SAMPLES}/MlpDemo.cs
    COMMAND ${MCS_EXECUTABLE} -nologo -r:${CS_DIR}/Shardopt.dll -out:${CS_DIR}/FsdpAdam.exe ${CS_SAMPLES}/FsdpAdam.cs ${CS_SAMPLES}/MlpDemo.cs
    COMMAND ${MCS_EXECUTABLE} -nologo -r:${CS_DIR}/Shardopt.dll -out:${CS_DIR}/PortedFsdp.exe ${CS_SAMPLES}/PortedFsdp.cs
    COMMAND ${MCS_EXECUTABLE} -nologo -r:${CS_DIR}/Shardopt.dll -out:${CS_DIR}/conformance_csharp.exe ${CS_CONFORMANCE}
    DEPENDS ${CS_DIR}/Shardopt.dll ${CS_TESTS} ${CS_SAMPLES}/MlpDemo.cs ${CS_SAMPLES}/FsdpAdam.cs ${CS_SAMPLES}/PortedFsdp.cs ${CS_CONFORMANCE}
    COMMENT "C# tests, samples and conformance driver")
  add_custom_target(shardopt_csharp_tests ALL DEPENDS ${CS_DIR}/ShardoptTests.exe)
  add_dependencies(shardopt_csharp_tests shardopt_csharp_dll)
  add_test(NAME bindings.csharp COMMAND ${MONO_EXECUTABLE} ${CS_DIR}/ShardoptTests.exe)
  add_test(NAME samples.csharp_fsdp_adam COMMAND ${MONO_EXECUTABLE} ${CS_DIR}/FsdpAdam.exe)
  # issue 19: mistakes raise (safety), ranks that disagree fail everywhere (agreement), the generic/model API (api);
  # issue 23: pipeline stages and runner (pipeline); issue 22: AsyncSGDOptimizer (async); issue 24: ElasticOptimizer (elastic);
  # issue 32: peers that go, the library's messages, calls from another thread (policy); issue 38: the planner (planner)
  # issue 34: NCCLCommunicationBackend, Memory and CudaStream (gpu); issue 37: Lion, Adafactor, NAdam, AdaMax, AdaDelta, Muon
  # (optimizers)
  foreach(group safety agreement api pipeline async elastic policy planner gpu optimizers)
    add_test(NAME bindings.csharp_${group} COMMAND ${MONO_EXECUTABLE} ${CS_DIR}/ShardoptTests.exe --group ${group})
  endforeach()
  # issue 32: every run of the cross-language table, and the seed example of AiDotNet's FSDPOptimizer page, equal to the
  # C driver's bit for bit (tests/bindings/conformance/README.md)
  set(CS_COMPARE python3 ${SHARDOPT_CONFORMANCE_COMPARE} --runs ${SHARDOPT_CONFORMANCE_RUNS} --c $<TARGET_FILE:conformance_c>)
  add_test(NAME bindings.conformance.csharp COMMAND ${CS_COMPARE} --driver csharp "${MONO_EXECUTABLE} ${CS_DIR}/conformance_csharp.exe")
  # UCX_HANDLE_ERRORS from the start: the preloaded library brings UCX in before the binding can set it (Native.cs)
  so_gpu_emulated_conformance(csharp "bindings;csharp" "LD_LIBRARY_PATH=${CS_DIR};UCX_HANDLE_ERRORS=none"
                              "${MONO_EXECUTABLE} ${CS_DIR}/conformance_csharp.exe")
  # issue 34: the caller's own device memory as the parameters (DeviceMemory<T>) and OrderStream, on the C ABI built
  # against the CUDA stand-in (capi/tests: shardopt_standin, preloaded in place of libshardopt.so.2)
  if(TARGET shardopt_standin OR (SHARDOPT_HAVE_CUDA AND SHARDOPT_HAVE_UCX))
    add_test(NAME bindings.csharp_gpu_emulated COMMAND ${MONO_EXECUTABLE} ${CS_DIR}/ShardoptTests.exe --group gpu_emulated)
    set_tests_properties(bindings.csharp_gpu_emulated PROPERTIES LABELS "csharp;gpu_emulated" TIMEOUT 120
      ENVIRONMENT "LD_LIBRARY_PATH=${CS_DIR};UCX_HANDLE_ERRORS=none;LD_PRELOAD=$<TARGET_FILE:shardopt_standin>;SHARDOPT_STANDIN_LIBRARY=$<TARGET_FILE:shardopt_standin>;SHARDOPT_TIMEOUT_MS=60000")
  endif()
  add_test(NAME samples.csharp_seed_example
           COMMAND ${CS_COMPARE} --driver csharp "${MONO_EXECUTABLE} ${CS_DIR}/PortedFsdp.exe" --only seed_example)
  set_tests_properties(bindings.conformance.csharp samples.csharp_seed_example PROPERTIES LABELS "bindings;csharp" TIMEOUT 600
    ENVIRONMENT "LD_LIBRARY_PATH=${CS_DIR}")
  set_tests_properties(bindings.csharp samples.csharp_fsdp_adam bindings.csharp_safety bindings.csharp_agreement
    bindings.csharp_api bindings.csharp_pipeline bindings.csharp_async bindings.csharp_elastic bindings.csharp_policy bindings.csharp_planner
    bindings.csharp_gpu bindings.csharp_optimizers
    PROPERTIES LABELS csharp TIMEOUT 300
    ENVIRONMENT "LD_LIBRARY_PATH=${CS_DIR};SHARDOPT_RUN=${SO_RUN};MONO=${MONO_EXECUTABLE};SHARDOPT_CS_DIR=${CS_DIR}")
endif()
message(STATUS "shardopt bindings: C# (mono)")
