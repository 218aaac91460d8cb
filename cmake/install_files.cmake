# Run by `cmake --install` (install(SCRIPT) in cmake/Install.cmake): the
# files whose contents name installed paths, written for the prefix being
# installed to (make install's PREFIX, or /usr in the Debian package), and
# the configuration, which an install never overwrites. DESTDIR is honoured
# by file(INSTALL).
set(prefix "${CMAKE_INSTALL_PREFIX}")
if(prefix STREQUAL "/usr" OR prefix STREQUAL "/usr/local")
  set(confdir /etc/tessera) # where tesserad looks by default
else()
  set(confdir "${prefix}/etc/tessera")
endif()
set(TSR_PREFIX "${prefix}")
set(TSR_BINDIR "${prefix}/bin")
set(TSR_CONFDIR "${confdir}")
set(TSR_DOCDIR "${prefix}/share/doc/tessera")
set(stage "${TSR_BUILD}/install-stage")
file(MAKE_DIRECTORY "${stage}")

configure_file("${TSR_SRC}/contrib/systemd/tesserad.service.in" "${stage}/tesserad.service" @ONLY)
file(INSTALL "${stage}/tesserad.service" DESTINATION "${prefix}/lib/systemd/system")

set(TSR_PC_DESCRIPTION "libtessera-rt: a persistent-kernel runtime for streams of small GPU operations")
configure_file("${TSR_SRC}/contrib/pkgconfig/tessera-rt.pc.in" "${stage}/tessera-rt.pc" @ONLY)
set(TSR_PC_DESCRIPTION "libtessera-frontier: ordering of work by frontiers, semaphores and queues")
configure_file("${TSR_SRC}/contrib/pkgconfig/tessera-frontier.pc.in" "${stage}/tessera-frontier.pc" @ONLY)
file(INSTALL "${stage}/tessera-rt.pc" "${stage}/tessera-frontier.pc" DESTINATION "${prefix}/lib/pkgconfig")

# the configuration: every default, commented; kept if one is there
if(EXISTS "$ENV{DESTDIR}${confdir}/tessera.conf")
  message(STATUS "Keeping: $ENV{DESTDIR}${confdir}/tessera.conf (the new default is in ${TSR_DOCDIR})")
else()
  file(INSTALL "${TSR_SRC}/contrib/tessera.conf.example" DESTINATION "${confdir}" RENAME tessera.conf)
endif()
