# Java: SWIG JNI module + the org.shardopt layer, packed into shardopt.jar with the native libraries
# (org/shardopt/native/linux-x86_64/), JUnit 5 tests, the samples and the conformance driver. Included from
# bindings/CMakeLists.txt.
set(J_DIR ${CMAKE_CURRENT_BINARY_DIR}/java)
set(J_GEN ${J_DIR}/gen/org/shardopt/internal)
set(J_NATIVE ${J_DIR}/res/org/shardopt/native/linux-x86_64)
swig_wrap(java ${J_GEN} ${J_DIR}/shardopt_java_wrap.c ${J_DIR}/swig.stamp -package org.shardopt.internal)
so_native_module(shardopt_java ${J_DIR}/shardopt_java_wrap.c ${J_NATIVE})
target_include_directories(shardopt_java PRIVATE ${JNI_INCLUDE_DIRS})
set_target_properties(shardopt_java PROPERTIES OUTPUT_NAME shardopt_java)

file(GLOB J_LAYER CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/java/src/org/shardopt/*.java)
set(J_JAR ${J_DIR}/shardopt.jar)
add_custom_command(
  OUTPUT ${J_JAR}
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${J_DIR}/classes
  COMMAND bash -c "rm -f ${J_NATIVE}/libshardopt.so.*" # a library of an older soname is not carried along
  COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:shardopt> ${J_NATIVE}/$<TARGET_SONAME_FILE_NAME:shardopt>
  COMMAND bash -c "${Java_JAVAC_EXECUTABLE} -nowarn -Xlint:-removal --release 11 -d ${J_DIR}/classes ${J_GEN}/*.java $<JOIN:${J_LAYER}, >"
  COMMAND ${Java_JAR_EXECUTABLE} cf ${J_JAR} -C ${J_DIR}/classes . -C ${J_DIR}/res .
  DEPENDS ${J_DIR}/swig.stamp ${J_LAYER} shardopt_java shardopt
  COMMENT "shardopt.jar")
add_custom_target(shardopt_jar ALL DEPENDS ${J_JAR})

set(JUNIT_JAR /usr/share/java/junit-platform-console-standalone.jar)
if(SHARDOPT_BUILD_TESTS)
  if(EXISTS ${JUNIT_JAR})
    file(GLOB J_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/java/test/org/shardopt/tests/*.java)
    file(GLOB J_SAMPLES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/samples/java/*.java)
    set(J_DEMO ${PROJECT_SOURCE_DIR}/samples/java/MlpDemo.java) # the demo model the tests share with the samples
    set(J_CONFORMANCE ${PROJECT_SOURCE_DIR}/tests/bindings/conformance/conformance_java.java)
    add_custom_command(
      OUTPUT ${J_DIR}/tests.stamp
      COMMAND ${CMAKE_COMMAND} -E rm -rf ${J_DIR}/test-classes ${J_DIR}/sample-classes ${J_DIR}/conformance-classes
      COMMAND ${Java_JAVAC_EXECUTABLE} -nowarn --release 11 -cp ${J_JAR}:${JUNIT_JAR} -d ${J_DIR}/test-classes ${J_TESTS} ${J_DEMO}
      COMMAND ${Java_JAVAC_EXECUTABLE} -nowarn --release 11 -cp ${J_JAR} -d ${J_DIR}/sample-classes ${J_SAMPLES}
      COMMAND ${Java_JAVAC_EXECUTABLE} -nowarn --release 11 -cp ${J_JAR} -d ${J_DIR}/conformance-classes ${J_CONFORMANCE}
      COMMAND ${CMAKE_COMMAND} -E touch ${J_DIR}/tests.stamp
      DEPENDS ${J_JAR} ${J_TESTS} ${J_SAMPLES} ${J_CONFORMANCE}
      COMMENT "Java tests, samples and conformance driver")
    add_custom_target(shardopt_java_tests ALL DEPENDS ${J_DIR}/tests.stamp)
    add_dependencies(shardopt_java_tests shardopt_jar)
    # The heap committed and touched from the start (-Xms = -Xmx, AlwaysPreTouch): the lifetime tests measure the
    # process's RSS for native leaks, and a heap the collector grows mid-measurement under load looked like one.
    set(J_RUN ${Java_JAVA_EXECUTABLE} -Xmx512m -Xms512m -XX:+AlwaysPreTouch -jar ${JUNIT_JAR} --disable-banner --details=summary --fail-if-no-tests
              -cp ${J_JAR}:${J_DIR}/test-classes)
    add_test(NAME bindings.java COMMAND ${J_RUN} --select-package org.shardopt.tests)
    add_test(NAME samples.java_fsdp_adam COMMAND ${Java_JAVA_EXECUTABLE} -cp ${J_JAR}:${J_DIR}/sample-classes FsdpAdam)
    # issue 19: the f64 path against the C++ core's reference, bit for bit (also run within bindings.java)
    add_test(NAME bindings.java_reference_f64 COMMAND ${J_RUN} "--select-method=org.shardopt.tests.ModelApiTest#f64BitForBitWithTheCore")
    # issue 37: Lion, Adafactor, NAdam, AdaMax, AdaDelta, Muon and their settings (also run within bindings.java)
    add_test(NAME bindings.java_optimizers COMMAND ${J_RUN} --select-class org.shardopt.tests.OptimizersTest)
    # issue 32: every run of the conformance table through the Java API, and AiDotNet's FSDPOptimizer page example
    # ported (SeedExample), equal to the C driver's bit for bit (tests/bindings/conformance/README.md)
    set(J_COMPARE ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/bindings/conformance/compare.py
                  --runs ${PROJECT_SOURCE_DIR}/tests/bindings/conformance/runs.txt --c $<TARGET_FILE:conformance_c>)
    add_test(NAME bindings.conformance.java COMMAND ${J_COMPARE} --driver java
             "${Java_JAVA_EXECUTABLE} -Xmx512m -cp ${J_JAR}:${J_DIR}/conformance-classes ConformanceJava")
    so_gpu_emulated_conformance(java "bindings;java" ""
      "${Java_JAVA_EXECUTABLE} -Xmx512m -cp ${J_JAR}:${J_DIR}/conformance-classes ConformanceJava")
    # issue 34: the caller's own device memory as the parameters (DeviceMemory) and orderStream, on the C ABI built
    # against the CUDA stand-in (capi/tests: shardopt_standin, preloaded in place of libshardopt.so.2); the test's CUDA
    # calls through a test-only JNI library over the stand-in's helpers (java/test/native)
    if(TARGET shardopt_standin OR (SHARDOPT_HAVE_CUDA AND SHARDOPT_HAVE_UCX))
      add_library(shardopt_standin_jni MODULE ${CMAKE_CURRENT_SOURCE_DIR}/java/test/native/standin_cuda_jni.c)
      target_include_directories(shardopt_standin_jni PRIVATE ${JNI_INCLUDE_DIRS})
      target_link_libraries(shardopt_standin_jni PRIVATE ${CMAKE_DL_LIBS})
      set_target_properties(shardopt_standin_jni PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${J_DIR}/test-native)
      add_test(NAME bindings.java_gpu_emulated COMMAND ${J_RUN} --select-class org.shardopt.tests.GpuEmulatedTest
                                                       --select-class org.shardopt.tests.DeviceBatchTest)
      set_tests_properties(bindings.java_gpu_emulated PROPERTIES LABELS "java;gpu_emulated" TIMEOUT 120
        ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:shardopt_standin>;SHARDOPT_STANDIN_LIBRARY=$<TARGET_FILE:shardopt_standin>;SHARDOPT_STANDIN_JNI=$<TARGET_FILE:shardopt_standin_jni>;SHARDOPT_TIMEOUT_MS=60000")
    endif()
    add_test(NAME samples.java_seed_example COMMAND ${J_COMPARE} --driver java
             "${Java_JAVA_EXECUTABLE} -cp ${J_JAR}:${J_DIR}/sample-classes SeedExample" --only seed_example)
    set_tests_properties(bindings.java samples.java_fsdp_adam bindings.java_reference_f64 bindings.java_optimizers bindings.conformance.java
                         samples.java_seed_example
                         PROPERTIES LABELS "bindings;java" TIMEOUT 300
      ENVIRONMENT "SHARDOPT_RUN=${SO_RUN};SHARDOPT_JAVA_CP=${J_JAR}:${J_DIR}/test-classes;JAVA=${Java_JAVA_EXECUTABLE};SHARDOPT_REFERENCE_F64=$<TARGET_FILE:bindings_reference_f64>")
  else()
    message(STATUS "shardopt bindings: ${JUNIT_JAR} missing (apt-get install junit5), Java tests skipped")
  endif()
endif()
message(STATUS "shardopt bindings: Java ${Java_VERSION_STRING}")
