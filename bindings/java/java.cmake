# Java: SWIG JNI module + the org.shardopt layer, packed into shardopt.jar with the native libraries
# (org/shardopt/native/linux-x86_64/), JUnit 5 tests and the sample. Included from bindings/CMakeLists.txt.
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
    add_custom_command(
      OUTPUT ${J_DIR}/tests.stamp
      COMMAND ${CMAKE_COMMAND} -E rm -rf ${J_DIR}/test-classes ${J_DIR}/sample-classes
      COMMAND ${Java_JAVAC_EXECUTABLE} -nowarn --release 11 -cp ${J_JAR}:${JUNIT_JAR} -d ${J_DIR}/test-classes ${J_TESTS}
      COMMAND ${Java_JAVAC_EXECUTABLE} -nowarn --release 11 -cp ${J_JAR} -d ${J_DIR}/sample-classes ${J_SAMPLES}
      COMMAND ${CMAKE_COMMAND} -E touch ${J_DIR}/tests.stamp
      DEPENDS ${J_JAR} ${J_TESTS} ${J_SAMPLES}
      COMMENT "Java tests and sample")
    add_custom_target(shardopt_java_tests ALL DEPENDS ${J_DIR}/tests.stamp)
    add_dependencies(shardopt_java_tests shardopt_jar)
    add_test(NAME bindings.java
             COMMAND ${Java_JAVA_EXECUTABLE} -Xmx512m -jar ${JUNIT_JAR} --disable-banner --details=summary
                     --fail-if-no-tests -cp ${J_JAR}:${J_DIR}/test-classes --select-package org.shardopt.tests)
    add_test(NAME samples.java_fsdp_adam COMMAND ${Java_JAVA_EXECUTABLE} -cp ${J_JAR}:${J_DIR}/sample-classes FsdpAdam)
    # issue 19: the f64 path against the C++ core's reference, bit for bit (also run within bindings.java)
    add_test(NAME bindings.java_reference_f64
             COMMAND ${Java_JAVA_EXECUTABLE} -Xmx512m -jar ${JUNIT_JAR} --disable-banner --details=summary
                     --fail-if-no-tests -cp ${J_JAR}:${J_DIR}/test-classes
                     "--select-method=org.shardopt.tests.ModelApiTest#f64BitForBitWithTheCore")
    # the seed example of AiDotNet's FSDPOptimizer page, ported: 4 in-memory ranks, and 4 UCX processes
    add_test(NAME samples.java_seed_example_inmemory COMMAND ${Java_JAVA_EXECUTABLE} -cp ${J_JAR}:${J_DIR}/sample-classes SeedExample)
    add_test(NAME samples.java_seed_example_ucx
             COMMAND python3 ${SO_RUN} -n 4 --timeout 120 -- ${Java_JAVA_EXECUTABLE} -cp ${J_JAR}:${J_DIR}/sample-classes SeedExample ucx)
    set_tests_properties(samples.java_seed_example_inmemory samples.java_seed_example_ucx PROPERTIES
      PASS_REGULAR_EXPRESSION "equal to the C\\+\\+ core.s reference bit for bit" FAIL_REGULAR_EXPRESSION "Exception|AssertionError")
    set_tests_properties(bindings.java samples.java_fsdp_adam bindings.java_reference_f64 samples.java_seed_example_inmemory
                         samples.java_seed_example_ucx PROPERTIES LABELS java TIMEOUT 300
      ENVIRONMENT "SHARDOPT_RUN=${SO_RUN};SHARDOPT_JAVA_CP=${J_JAR}:${J_DIR}/test-classes;JAVA=${Java_JAVA_EXECUTABLE};SHARDOPT_REFERENCE_F64=$<TARGET_FILE:bindings_reference_f64>")
  else()
    message(STATUS "shardopt bindings: ${JUNIT_JAR} missing (apt-get install junit5), Java tests skipped")
  endif()
endif()
message(STATUS "shardopt bindings: Java ${Java_VERSION_STRING}")
