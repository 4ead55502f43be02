# CPack: the library's two Debian packages named after the soname, as Debian policy does, and
# the tools in their own package (a library package holds no programs).
#   libshardopt2     /usr/lib/<multiarch>/libshardopt.so.2{,.0.2.0}          (the C ABI, runtime)
#   libshardopt-dev  headers (shardopt.h, shardopt/*.hpp), libshardopt.so, libshardopt_core.a,
#                    the CMake package (find_package(shardopt)), pkg-config shardopt, shardopt-c
#   shardopt-tools   /usr/bin/shardopt-run (the launcher), shardopt-ckpt (offline checkpoints),
#                    shardopt-plan (the planner)
# The rules below are the packages' own (components libshardopt2 and libshardopt-dev), with
# Debian's paths (prefix /usr, lib/<multiarch>) whatever prefix this build was configured with;
# the project's own install() rules (component Unspecified) are not packaged.
# Build: packaging/native/build-debs.sh BUILD_DIR DIST_DIR
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SO_DEB_LIBDIR lib)
if(CMAKE_LIBRARY_ARCHITECTURE)
  set(SO_DEB_LIBDIR lib/${CMAKE_LIBRARY_ARCHITECTURE})
endif()
set(SO_DEB_OUT ${CMAKE_BINARY_DIR}/packaging/native)
get_target_property(SO_DEB_SOVERSION shardopt SOVERSION)

# runtime
install(TARGETS shardopt EXPORT shardoptDebTargets
        LIBRARY DESTINATION ${SO_DEB_LIBDIR} COMPONENT libshardopt2 NAMELINK_COMPONENT libshardopt-dev
        INCLUDES DESTINATION include)
# development
install(TARGETS shardopt_core EXPORT shardoptDebTargets
        ARCHIVE DESTINATION ${SO_DEB_LIBDIR} COMPONENT libshardopt-dev
        INCLUDES DESTINATION include)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/shardopt DESTINATION include COMPONENT libshardopt-dev)
install(FILES ${PROJECT_SOURCE_DIR}/capi/include/shardopt.h DESTINATION include COMPONENT libshardopt-dev)
install(EXPORT shardoptDebTargets NAMESPACE shardopt:: FILE shardoptTargets.cmake
        DESTINATION ${SO_DEB_LIBDIR}/cmake/shardopt COMPONENT libshardopt-dev)
# The project's templates, configured with the package's paths (these variables are local to
# the function, so the build's own install rules keep theirs).
function(shardopt_deb_configure)
  set(CMAKE_INSTALL_PREFIX /usr)
  set(CMAKE_INSTALL_LIBDIR ${SO_DEB_LIBDIR})
  set(CMAKE_INSTALL_INCLUDEDIR include)
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/shardoptConfig.cmake.in
                                ${SO_DEB_OUT}/shardoptConfig.cmake
                                INSTALL_DESTINATION ${SO_DEB_LIBDIR}/cmake/shardopt)
  write_basic_package_version_file(${SO_DEB_OUT}/shardoptConfigVersion.cmake
                                   VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/shardopt.pc.in ${SO_DEB_OUT}/shardopt.pc.configured @ONLY)
  # The template's relocatable prefix (${pcfiledir}/../..) assumes lib/pkgconfig; Debian's is
  # lib/<multiarch>/pkgconfig: point it at the prefix from there.
  file(RELATIVE_PATH up /usr/${SO_DEB_LIBDIR}/pkgconfig /usr)
  string(REGEX REPLACE "/$" "" up "${up}")
  file(READ ${SO_DEB_OUT}/shardopt.pc.configured pc)
  string(FIND "${pc}" [=[prefix=${pcfiledir}/../..]=] at)
  if(at LESS 0)
    message(FATAL_ERROR "cmake/shardopt.pc.in: no 'prefix=\${pcfiledir}/../..' line (see packaging/native/cpack.cmake)")
  endif()
  string(REPLACE [=[prefix=${pcfiledir}/../..]=] "prefix=\${pcfiledir}/${up}" pc "${pc}")
  file(WRITE ${SO_DEB_OUT}/shardopt.pc.new "${pc}")
  configure_file(${SO_DEB_OUT}/shardopt.pc.new ${SO_DEB_OUT}/shardopt.pc COPYONLY) # rewritten only on change
  configure_file(${PROJECT_SOURCE_DIR}/cmake/shardopt-c.pc.in ${SO_DEB_OUT}/shardopt-c.pc @ONLY)
endfunction()
shardopt_deb_configure()
install(FILES ${SO_DEB_OUT}/shardoptConfig.cmake ${SO_DEB_OUT}/shardoptConfigVersion.cmake
        DESTINATION ${SO_DEB_LIBDIR}/cmake/shardopt COMPONENT libshardopt-dev)
install(FILES ${SO_DEB_OUT}/shardopt.pc ${SO_DEB_OUT}/shardopt-c.pc
        DESTINATION ${SO_DEB_LIBDIR}/pkgconfig COMPONENT libshardopt-dev)

# tools: the C++ programs, and the launcher: tools/shardopt-run with the two modules it runs (only
# Python's standard library besides), laid out under /usr/lib/shardopt as in the source tree, which
# is where the script looks for them; /usr/bin/shardopt-run runs it.
install(TARGETS shardopt-ckpt shardopt-plan RUNTIME DESTINATION bin COMPONENT shardopt-tools)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/shardopt-run DESTINATION lib/shardopt/tools COMPONENT shardopt-tools)
install(FILES ${PROJECT_SOURCE_DIR}/bindings/python/shardopt/run.py ${PROJECT_SOURCE_DIR}/bindings/python/shardopt/elastic_agent.py
        DESTINATION lib/shardopt/bindings/python/shardopt COMPONENT shardopt-tools)
file(WRITE ${SO_DEB_OUT}/shardopt-run "#!/bin/sh\nexec python3 /usr/lib/shardopt/tools/shardopt-run \"$@\"\n")
install(PROGRAMS ${SO_DEB_OUT}/shardopt-run DESTINATION bin COMPONENT shardopt-tools)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME shardopt)
set(CPACK_PACKAGE_VENDOR shardopt)
set(CPACK_PACKAGE_CONTACT "shardopt maintainers <shardopt@invalid>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_HOMEPAGE_URL "https://github.com/shardopt/shardopt")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packaging/native/cpack)
set(CPACK_COMPONENTS_ALL libshardopt2 libshardopt-dev shardopt-tools)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)           # <name>_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIBSHARDOPT2_PACKAGE_NAME libshardopt${SO_DEB_SOVERSION})
set(CPACK_DEBIAN_LIBSHARDOPT-DEV_PACKAGE_NAME libshardopt-dev)
set(CPACK_DEBIAN_LIBSHARDOPT-DEV_PACKAGE_SECTION libdevel)
# Run-time dependencies from the library's DT_NEEDED (dpkg-shlibdeps: libc6, libstdc++6,
# libgcc-s1, libucx0, libxxhash0 here). The GPU parts are opened at run time when present.
set(CPACK_DEBIAN_LIBSHARDOPT2_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)       # a shlibs file for packages built against it
set(CPACK_DEBIAN_LIBSHARDOPT2_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_LIST_DIR}/debian/triggers) # ldconfig
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_LIBSHARDOPT2_DESCRIPTION
"${PROJECT_DESCRIPTION} - the library
 libshardopt.so.${SO_DEB_SOVERSION}: the stable C ABI (shardopt.h) over the C++ core, with the
 in-process and UCX collectives. CUDA and NCCL are used when present and reported unavailable
 otherwise.")
# The static core and the CMake package need the headers and pkg-config files of what the core
# links (xxhash, UCX), and pkg-config for find_package(shardopt).
set(CPACK_DEBIAN_LIBSHARDOPT-DEV_PACKAGE_DEPENDS
    "libshardopt${SO_DEB_SOVERSION} (= ${PROJECT_VERSION}-1), libxxhash-dev, libucx-dev, pkgconf | pkg-config")
set(CPACK_DEBIAN_LIBSHARDOPT-DEV_DESCRIPTION
"${PROJECT_DESCRIPTION} - development files
 Headers (shardopt.h for the C ABI, shardopt/*.hpp for C++), libshardopt.so, the static C++
 core libshardopt_core.a, the CMake package (find_package(shardopt): shardopt::shardopt,
 shardopt::shardopt_core) and the pkg-config files shardopt-c and shardopt.")
set(CPACK_DEBIAN_SHARDOPT-TOOLS_PACKAGE_NAME shardopt-tools)
set(CPACK_DEBIAN_SHARDOPT-TOOLS_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_SHARDOPT-TOOLS_PACKAGE_SHLIBDEPS ON) # the programs link the static core: libxxhash0, libucx0 ...
set(CPACK_DEBIAN_SHARDOPT-TOOLS_PACKAGE_DEPENDS "python3")
set(CPACK_DEBIAN_SHARDOPT-TOOLS_DESCRIPTION
"${PROJECT_DESCRIPTION} - tools
 shardopt-run starts the ranks of a job on this host (or one host's share of a multi-host job,
 elastic with --elastic); shardopt-ckpt inspects, verifies, converts (sharded <-> consolidated,
 another world size) and exports (safetensors) checkpoints offline; shardopt-plan tells which
 strategies fit a model on a cluster, fastest first.")
include(CPack)
