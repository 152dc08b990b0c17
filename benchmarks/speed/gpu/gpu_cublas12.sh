# Sourced by the GPU run scripts: CTranslate2 4.8's CUDA build loads cuBLAS 12 at run time.
# The image has CUDA 13's, with the same entry points: where no cuBLAS 12 is found, a
# directory of links gives CUDA 13's libraries the sonames it asks for.
{
  echo "=== cuBLAS libraries found"
  find / -xdev \( -name 'libcublas.so*' -o -name 'libcublasLt.so*' \) 2>/dev/null
} >>"$CHECKS" 2>&1
twelve=$(find / -xdev -name 'libcublas.so.12*' 2>/dev/null | head -1)
if [ -n "$twelve" ]; then
  export LD_LIBRARY_PATH=$(dirname "$twelve"):${LD_LIBRARY_PATH:-}
else
  mkdir -p /tmp/cublas12
  cublas=$(find / -xdev -name 'libcublas.so.1[3-9]*' 2>/dev/null | head -1)
  cublaslt=$(find / -xdev -name 'libcublasLt.so.1[3-9]*' 2>/dev/null | head -1)
  ln -sf "$cublas" /tmp/cublas12/libcublas.so.12
  ln -sf "$cublaslt" /tmp/cublas12/libcublasLt.so.12
  export LD_LIBRARY_PATH=/tmp/cublas12:$(dirname "$cublas"):${LD_LIBRARY_PATH:-}
fi
