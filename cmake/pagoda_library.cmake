# pagoda_add_library(NAME <target> DIR <src-relative dir> SOURCES ... [DEPS ...] [PUBLIC_DEPS ...])
#
# One library target per folder of src/. Headers of a folder are reachable as
# "<dir>/<file>.h" only by targets that link the library: each library stages
# symlinks to its own headers (not its subfolders) in build/inc/<target>/<dir>/
# and exposes that staging root, so an include of a module that is not a
# dependency fails to compile. DEPS are PRIVATE; PUBLIC_DEPS are for modules
# whose types appear in this module's own headers. Without SOURCES the
# library is header-only (an INTERFACE target).
function(pagoda_add_library)
  cmake_parse_arguments(ARG "" "NAME;DIR" "SOURCES;DEPS;PUBLIC_DEPS;CUDA_SOURCES" ${ARGN})
  set(stage ${CMAKE_BINARY_DIR}/inc/${ARG_NAME})
  file(GLOB headers CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/src/${ARG_DIR}/*.h ${PROJECT_SOURCE_DIR}/src/${ARG_DIR}/*.cuh)
  file(REMOVE_RECURSE ${stage})
  file(MAKE_DIRECTORY ${stage}/${ARG_DIR})
  foreach(h ${headers})
    get_filename_component(fname ${h} NAME)
    file(CREATE_LINK ${h} ${stage}/${ARG_DIR}/${fname} SYMBOLIC)
  endforeach()
  if(NOT ARG_SOURCES AND NOT ARG_CUDA_SOURCES)
    # Header-only: an interface library that only exposes its staged headers.
    add_library(${ARG_NAME} INTERFACE)
    target_include_directories(${ARG_NAME} INTERFACE $<BUILD_INTERFACE:${stage}>)
    target_link_libraries(${ARG_NAME} INTERFACE ${ARG_PUBLIC_DEPS})
    return()
  endif()
  add_library(${ARG_NAME} STATIC ${ARG_SOURCES} ${ARG_CUDA_SOURCES})
  target_include_directories(${ARG_NAME} PUBLIC $<BUILD_INTERFACE:${stage}>)
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} pagoda_warnings PUBLIC ${ARG_PUBLIC_DEPS})
  set_target_properties(${ARG_NAME} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()
