# The libraries drx's sources link, for the main build and the fuzz build (which
# leaves DRX_ONEDNN unset, so off).
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
  # oneDNN (libdnnl-dev) for bf16 products (drx/exec/onednn.h). Its OpenMP runtime (GNU's) is
  # linked too: drx sets one OpenMP thread on each thread that runs a oneDNN primitive.
  if(DRX_ONEDNN)
    find_package(dnnl CONFIG REQUIRED)
    find_package(OpenMP REQUIRED COMPONENTS CXX)
    target_link_libraries(${target} ${scope} DNNL::dnnl OpenMP::OpenMP_CXX)
    target_compile_definitions(${target} PRIVATE DRX_HAVE_ONEDNN=1)
  endif()
endfunction()
