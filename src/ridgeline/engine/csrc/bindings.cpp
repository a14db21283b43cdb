// The Python module: TORCH_EXTENSION_NAME is set by the build (kernel_build.py), one name per
// build key, so two builds of different sources never meet in one process's sys.modules.
#include <torch/extension.h>

#include "kernels.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace ridgeline;
  m.def("has_avx512", &has_avx512, "whether this build targets AVX-512F");
  m.def("paged_attention_rows", &paged_attention_rows);
  m.def("write_kv", &write_kv);
  m.def("pack", &pack);
  m.def("linear", &linear);
  m.def("add_rms_norm", &add_rms_norm);
  m.def("add_layer_norm", &add_layer_norm);
  m.def("rope_", &rope_);
  m.def("silu_mul", &silu_mul);
  m.def("gelu_tanh", &gelu_tanh);
  m.def("argmax_rows", &argmax_rows);
  m.def("decode_layer", &decode_layer);
}
