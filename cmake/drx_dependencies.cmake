# The libraries drx's sources link, for the main build and the fuzz build.
# OpenBLAS by name: Debian also ships the reference BLAS, which is many times
# slower. cblas.h lives in a per-flavour subdirectory.
function(drx_link_dependencies target scope)
  if(NOT DEFINED BLA_VENDOR)
    set(BLA_VENDOR OpenBLAS)
  endif()
  find_package(BLAS REQUIRED)
  find_package(Threads REQUIRED)
  find_package(ZLIB REQUIRED)  # drx/data reads gzipped datasets
  find_path(DRX_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas-pthread openblas)
  if(DRX_CBLAS_INCLUDE_DIR)
    target_include_directories(${target} PRIVATE ${DRX_CBLAS_INCLUDE_DIR})
  endif()
  target_link_libraries(${target} ${scope} BLAS::BLAS Threads::Threads ZLIB::ZLIB)
endfunction()
