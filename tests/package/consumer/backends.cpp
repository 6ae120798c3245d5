// Which optional parts of the installed remat this program sees: every remat::<part> target
// defines REMAT_HAS_<PART> for the programs that link it (CMakeLists.txt links each one that
// exists), so this prints the parts the install has.
#include <cstdio>

#if defined(REMAT_HAS_CUDA)
// Host code: compiles with the C++ compiler and links against the CUDA runtime alone (no
// cuBLAS, no GPU needed).
#include <remat/exec/cuda/device.hpp>
#endif

int main() {
  std::printf("parts:");
#if defined(REMAT_HAS_JSON)
  std::printf(" json");
#endif
#if defined(REMAT_HAS_LPSOLVE)
  std::printf(" lpsolve");
#endif
#if defined(REMAT_HAS_CBC)
  std::printf(" cbc");
#endif
#if defined(REMAT_HAS_CUDA)
  (void)remat::cuda::device_count();  // 0 without a GPU
  std::printf(" cuda");
#endif
#if defined(REMAT_HAS_TORCH)  // linked through the install's find_package(Torch); no LibTorch
                              // header here
  std::printf(" torch");
#endif
#if defined(REMAT_HAS_MPI)  // MPI::MPI_CXX through the install's find_package(MPI)
  std::printf(" mpi");
#endif
#if defined(REMAT_HAS_NCCL)  // libnccl by its path, with remat::cuda and remat::mpi
  std::printf(" nccl");
#endif
  std::printf("\n");
  return 0;
}
