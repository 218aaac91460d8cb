# Installation: `make install` (PREFIX, DESTDIR) and the Debian package
# (`make deb`, CPack). Included last by the top-level CMakeLists.txt.
#
#   bin/tessera, bin/tesserad
#   lib/tessera/libtessera-cuda.so        the shims (`tessera run` looks in ../lib/tessera)
#   lib/tessera/libtessera-opencl.so      (where the OpenCL headers were found at build time)
#   lib/tessera/libtessera-preload.so     both shims in one, for /etc/ld.so.preload (likewise)
#   lib/libtessera-rt.so, lib/libtessera-frontier.so, lib/pkgconfig/*.pc
#   include/tessera/{rt,frontier,status}.h
#   lib/systemd/system/tesserad.service   (not enabled)
#   share/man/man1/tessera.1, share/man/man8/tesserad.8 (help2man, from --help)
#   share/doc/tessera/                    docs/*.md, tessera.conf.example, copyright (LICENSE)
#   /etc/tessera/tessera.conf             (PREFIX/etc/tessera outside /usr and /usr/local;
#                                          never overwritten)
install(TARGETS tessera tesserad RUNTIME DESTINATION bin)
install(TARGETS tessera_cuda LIBRARY DESTINATION lib/tessera)
if(TARGET tessera_opencl)
  install(TARGETS tessera_opencl LIBRARY DESTINATION lib/tessera)
endif()
if(TARGET tessera_preload)
  install(TARGETS tessera_preload LIBRARY DESTINATION lib/tessera)
endif()
install(TARGETS tessera_rt_shared tessera_frontier_shared LIBRARY DESTINATION lib)
if(TARGET tessera_torch)
  install(FILES ${TSR_TORCH_LIBRARY} DESTINATION lib)
endif()
install(FILES ${CMAKE_SOURCE_DIR}/include/tessera/rt.h ${CMAKE_SOURCE_DIR}/include/tessera/frontier.h
              ${CMAKE_SOURCE_DIR}/include/tessera/status.h
        DESTINATION include/tessera)
file(GLOB _tsr_docs ${CMAKE_SOURCE_DIR}/docs/*.md ${CMAKE_SOURCE_DIR}/docs/*.svg)
install(FILES ${_tsr_docs} ${CMAKE_SOURCE_DIR}/contrib/tessera.conf.example DESTINATION share/doc/tessera)
install(FILES ${CMAKE_SOURCE_DIR}/LICENSE DESTINATION share/doc/tessera RENAME copyright)
install(CODE "set(TSR_SRC \"${CMAKE_SOURCE_DIR}\")\nset(TSR_BUILD \"${CMAKE_BINARY_DIR}\")\nset(TSR_VERSION \"${PROJECT_VERSION}\")")
install(SCRIPT ${CMAKE_SOURCE_DIR}/cmake/install_files.cmake)

# man pages from the programs' own --help and --version (one source)
find_program(TSR_HELP2MAN help2man)
if(TESSERA_SANITIZE)
  # the sanitizer builds are for tests: running their programs at build time
  # (TSan can refuse to start on a kernel with more ASLR bits) buys nothing
  message(STATUS "sanitizer build: no man pages")
elseif(TSR_HELP2MAN)
  set(_man ${CMAKE_BINARY_DIR}/man)
  add_custom_command(OUTPUT ${_man}/tessera.1 ${_man}/tesserad.8
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_man}
    COMMAND ${TSR_HELP2MAN} --no-info --section 1 --name "share the GPUs of one node: leases, enforcement, MIG plans"
            --output ${_man}/tessera.1 $<TARGET_FILE:tessera>
    COMMAND ${TSR_HELP2MAN} --no-info --section 8 --name "the tessera node daemon: GPU leases"
            --output ${_man}/tesserad.8 $<TARGET_FILE:tesserad>
    DEPENDS tessera tesserad
    COMMENT "man pages from tessera --help and tesserad --help"
    VERBATIM)
  add_custom_target(tessera_man ALL DEPENDS ${_man}/tessera.1 ${_man}/tesserad.8)
  install(FILES ${_man}/tessera.1 DESTINATION share/man/man1)
  install(FILES ${_man}/tesserad.8 DESTINATION share/man/man8)
else()
  message(STATUS "help2man not found (Debian: help2man): no man pages; make install leaves them out")
endif()

# ---- the Debian package: make deb ------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tessera)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU sharing for multi-tenant nodes: leases, enforcement, MIG planning")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_CONTACT "tessera maintainers <tessera@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/contrib/debian/postinst
                                       ${CMAKE_SOURCE_DIR}/contrib/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
