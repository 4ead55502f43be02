# The Python binding: the SWIG module, the package layer in shardopt/, its tests and samples
# (included by bindings/CMakeLists.txt when Python's development files are found).
set(PY_PKG ${CMAKE_CURRENT_BINARY_DIR}/python/shardopt) # the importable package, built here
set(PY_GEN ${CMAKE_CURRENT_BINARY_DIR}/python_gen)
swig_wrap(python ${PY_GEN} ${PY_GEN}_wrap.c ${PY_GEN}.stamp -threads)
so_native_module(shardopt_python ${PY_GEN}_wrap.c ${PY_PKG})
target_link_libraries(shardopt_python PRIVATE Python3::Module)
# The limited API (the stable ABI, abi3): one module, _shardopt_native.abi3.so, loads on every CPython from 3.11 (the
# wheel's tag cp311-abi3). It needs SWIG >= 4.2 (its runtime keeps to the limited API; bindings/CMakeLists.txt) and
# Python >= 3.11 (the buffer protocol is in the limited API since 3.11). Without them, or with
# -DSHARDOPT_PYTHON_LIMITED_API=OFF, the module is this Python's alone: _shardopt_native.so.
option(SHARDOPT_PYTHON_LIMITED_API "Build the Python module against the limited API (abi3, CPython >= 3.11)" ON)
set(PY_LIMITED_API OFF)
if(NOT SHARDOPT_PYTHON_LIMITED_API)
  message(STATUS "shardopt bindings: Python module for Python ${Python3_VERSION} only (SHARDOPT_PYTHON_LIMITED_API=OFF)")
elseif(SWIG_VERSION VERSION_LESS 4.2)
  message(STATUS "shardopt bindings: Python module for Python ${Python3_VERSION} only: the limited API (abi3) needs "
                 "SWIG >= 4.2, found ${SWIG_VERSION} (./dev deps: pip install swig)")
elseif(Python3_VERSION VERSION_LESS 3.11 OR NOT Python3_INTERPRETER_ID STREQUAL "Python")
  message(STATUS "shardopt bindings: Python module for Python ${Python3_VERSION} only: the limited API (abi3) needs "
                 "CPython >= 3.11")
else()
  set(PY_LIMITED_API ON)
endif()
if(PY_LIMITED_API)
  target_compile_definitions(shardopt_python PRIVATE Py_LIMITED_API=0x030B0000)
  set_target_properties(shardopt_python PROPERTIES SUFFIX .abi3.so)
endif()
# read by packaging/python/CMakeLists.txt (the wheel's tag)
set_target_properties(shardopt_python PROPERTIES OUTPUT_NAME _shardopt_native PREFIX "" SHARDOPT_LIMITED_API ${PY_LIMITED_API})
file(GLOB PY_LAYER CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/python/shardopt/*.py)
# shardopt.torch (docs/torch.md): a subpackage, copied into the package's torch/ folder
file(GLOB PY_TORCH_LAYER CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/python/shardopt/torch/*.py)
if(PY_LIMITED_API) # the module of the other kind, left by an earlier build, would be imported instead (or beside)
  set(PY_OTHER_MODULE ${PY_PKG}/_shardopt_native.so)
else()
  set(PY_OTHER_MODULE ${PY_PKG}/_shardopt_native.abi3.so)
endif()
add_custom_command(TARGET shardopt_python POST_BUILD
  COMMAND ${CMAKE_COMMAND} -E rm -f ${PY_OTHER_MODULE}
  COMMAND ${CMAKE_COMMAND} -E copy ${PY_GEN}/shardopt_native.py ${PY_LAYER} ${PY_PKG}/
  COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:shardopt> ${PY_PKG}/
  COMMAND ${CMAKE_COMMAND} -E create_symlink $<TARGET_FILE_NAME:shardopt> ${PY_PKG}/$<TARGET_SONAME_FILE_NAME:shardopt>
  COMMENT "Python package in ${PY_PKG}")
# the hand-written layer is copied again whenever one of its files changes (no relink needed)
add_custom_command(OUTPUT ${PY_GEN}_layer.stamp
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PY_PKG}
  COMMAND ${CMAKE_COMMAND} -E copy ${PY_LAYER} ${PY_PKG}/
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PY_PKG}/torch
  COMMAND ${CMAKE_COMMAND} -E copy ${PY_TORCH_LAYER} ${PY_PKG}/torch/
  COMMAND ${CMAKE_COMMAND} -E touch ${PY_GEN}_layer.stamp
  DEPENDS ${PY_LAYER} ${PY_TORCH_LAYER}
  COMMENT "Python layer into ${PY_PKG}")
add_custom_target(shardopt_python_layer ALL DEPENDS ${PY_GEN}_layer.stamp)
add_dependencies(shardopt_python shardopt_python_layer)
if(SHARDOPT_BUILD_TESTS)
  # The module is what the build says: the limited API's (.abi3.so, compiled with Py_LIMITED_API, the stable ABI's
  # symbols alone: abi3audit, skipped without it), else the version-specific one (then skipped)
  add_test(NAME bindings.python_abi3 COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/python/check_stable_abi.py
                                             $<TARGET_FILE:shardopt_python> ${PY_LIMITED_API})
  set_tests_properties(bindings.python_abi3 PROPERTIES LABELS "unit;python" TIMEOUT 60 SKIP_RETURN_CODE 77)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import pytest, numpy" RESULT_VARIABLE PY_DEPS_MISSING
                  OUTPUT_QUIET ERROR_QUIET)
  if(PY_DEPS_MISSING)
    message(STATUS "shardopt bindings: Python tests skipped (pip install pytest numpy)")
  else()
    set(PY_ENV PYTHONPATH=${CMAKE_CURRENT_BINARY_DIR}/python SHARDOPT_LIBRARY=$<TARGET_FILE:shardopt>
        SHARDOPT_RUN=${SO_RUN} SHARDOPT_CKPT=$<TARGET_FILE:shardopt-ckpt> PYTHONDONTWRITEBYTECODE=1)
    if(TARGET bindings_reference_f64) # the f64 reference the bit-for-bit test compares with
      list(APPEND PY_ENV SHARDOPT_REFERENCE_F64=$<TARGET_FILE:bindings_reference_f64>)
    endif()
    # shardopt.torch's tests are bindings.python_torch's (below)
    set(PY_TESTS ${CMAKE_CURRENT_SOURCE_DIR}/python/tests)
    add_test(NAME bindings.python
             COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider --ignore=${PY_TESTS}/test_torch_equivalence.py
                     --ignore=${PY_TESTS}/test_torch_features.py --ignore=${PY_TESTS}/test_torch_launch.py
                     --ignore=${PY_TESTS}/test_torch_optimizers.py --ignore=${PY_TESTS}/test_torch_checkpoints.py
                     ${PY_TESTS})
    add_test(NAME samples.python_fsdp_adam
             COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/samples/python/fsdp_adam.py)
    # The cross-language conformance suite (tests/bindings/conformance): every run of its table through the
    # Python API, equal to the C driver's bit for bit.
    set(PY_CONFORMANCE --runs ${SHARDOPT_CONFORMANCE_RUNS} --c $<TARGET_FILE:conformance_c>)
    add_test(NAME bindings.conformance.python
             COMMAND ${Python3_EXECUTABLE} ${SHARDOPT_CONFORMANCE_COMPARE} ${PY_CONFORMANCE} --driver python
                     "${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/bindings/conformance/conformance_python.py")
    # AiDotNet's FSDPOptimizer example with only the import and the model changed: the C driver's seed_example
    # bit for bit (4 in-memory ranks), and 4 UCX processes each equal to it
    add_test(NAME samples.python_seed_example
             COMMAND ${Python3_EXECUTABLE} ${SHARDOPT_CONFORMANCE_COMPARE} ${PY_CONFORMANCE} --only seed_example
                     --driver python "${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/samples/python/port_fsdp_double.py")
    add_test(NAME samples.python_seed_example_ucx
             COMMAND ${Python3_EXECUTABLE} ${SO_RUN} -n 4 --timeout 120 -- ${Python3_EXECUTABLE}
                     ${PROJECT_SOURCE_DIR}/samples/python/port_fsdp_double.py --ucx)
    set_tests_properties(bindings.python samples.python_fsdp_adam samples.python_seed_example
                         PROPERTIES LABELS python TIMEOUT 300 ENVIRONMENT "${PY_ENV}")
    set_tests_properties(bindings.conformance.python PROPERTIES LABELS "bindings;python" TIMEOUT 600
                         ENVIRONMENT "${PY_ENV}")
    set_tests_properties(samples.python_seed_example_ucx PROPERTIES LABELS "python;ucx" TIMEOUT 150
                         ENVIRONMENT "${PY_ENV}")
    so_gpu_emulated_conformance(python "bindings;python" "${PY_ENV}"
      "${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/bindings/conformance/conformance_python.py")
    # issue 34: the module over the C ABI built against the CUDA stand-in (capi/tests: shardopt_standin, the same
    # soname, preloaded): an optimizer in CUDA memory and its device views without a GPU
    if(TARGET shardopt_standin OR (SHARDOPT_HAVE_CUDA AND SHARDOPT_HAVE_UCX))
      add_test(NAME bindings.python_gpu_emulated
               COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider
                       ${CMAKE_CURRENT_SOURCE_DIR}/python/tests_gpu_emulated)
      set_tests_properties(bindings.python_gpu_emulated PROPERTIES LABELS "python;gpu_emulated" TIMEOUT 120
        ENVIRONMENT "${PY_ENV};LD_PRELOAD=$<TARGET_FILE:shardopt_standin>;SHARDOPT_STANDIN_LIBRARY=$<TARGET_FILE:shardopt_standin>;SHARDOPT_TIMEOUT_MS=60000")
    endif()
    # shardopt.torch (docs/torch.md): in-memory ranks in one pytest process (torch's imports paid once), and the
    # launches (shardopt.run, torchrun and torchrun's elastic restart over UCX); skipped without torch
    execute_process(COMMAND ${Python3_EXECUTABLE} -c "import torch" RESULT_VARIABLE PY_TORCH_MISSING
                    OUTPUT_QUIET ERROR_QUIET)
    if(PY_TORCH_MISSING)
      message(STATUS "shardopt bindings: shardopt.torch tests skipped (./dev deps installs torch)")
    else()
      set(PY_TORCH_TESTS ${CMAKE_CURRENT_SOURCE_DIR}/python/tests)
      add_test(NAME bindings.python_torch
               COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${PY_TORCH_TESTS}/test_torch_equivalence.py
                       ${PY_TORCH_TESTS}/test_torch_features.py ${PY_TORCH_TESTS}/test_torch_optimizers.py
                       ${PY_TORCH_TESTS}/test_torch_fsdp_units.py ${PY_TORCH_TESTS}/test_torch_checkpoints.py)
      add_test(NAME bindings.python_torch_launch
               COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${PY_TORCH_TESTS}/test_torch_launch.py)
      set_tests_properties(bindings.python_torch PROPERTIES LABELS "python;torch" TIMEOUT 300
                           ENVIRONMENT "${PY_ENV}")
      set_tests_properties(bindings.python_torch_launch PROPERTIES LABELS "python;torch;ucx" TIMEOUT 300
                           ENVIRONMENT "${PY_ENV}")
      # issue 34: a torch MLP over views of the library's memory equals torch.optim.AdamW; host memory here, CUDA
      # memory on the NCCL backend with label gpu (a GPU machine: bash .gpucarry/run ctest -L '^gpu$')
      set(PY_TORCH_VIEWS ${CMAKE_CURRENT_SOURCE_DIR}/python/tests_gpu/test_torch_views.py)
      add_test(NAME bindings.python_torch_views COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider -k cpu ${PY_TORCH_VIEWS})
      add_test(NAME bindings.python_gpu COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider -k cuda ${PY_TORCH_VIEWS})
      set_tests_properties(bindings.python_torch_views PROPERTIES LABELS "python;torch" TIMEOUT 120 ENVIRONMENT "${PY_ENV}")
      set_tests_properties(bindings.python_gpu PROPERTIES LABELS "gpu;python" TIMEOUT 300 ENVIRONMENT "${PY_ENV}")
      # issue 36: shardopt.torch with the model on a GPU (torch views of the library's CUDA memory): against
      # torch.optim.AdamW per strategy, 2 ranks on one GPU (staged), bad placements; skipped without a GPU
      add_test(NAME bindings.python_torch_cuda COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider
               ${CMAKE_CURRENT_SOURCE_DIR}/python/tests_gpu/test_torch_cuda.py)
      set_tests_properties(bindings.python_torch_cuda PROPERTIES LABELS "gpu;python;torch" TIMEOUT 300
                           ENVIRONMENT "${PY_ENV};SHARDOPT_TIMEOUT_MS=60000")
    endif()
  endif()
endif()
if(PY_LIMITED_API)
  message(STATUS "shardopt bindings: Python ${Python3_VERSION}, limited API (abi3: CPython >= 3.11)")
else()
  message(STATUS "shardopt bindings: Python ${Python3_VERSION}")
endif()
