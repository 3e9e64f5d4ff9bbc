// Self-test of the harness: exactly one of the features gpu / interpreter is
// set, a GPU is either rocm or cuda, and mfma only on ROCm. `lit -a` shows them.
// RUN: echo "gpu=%if gpu %{1%} %else %{0%} interpreter=%if interpreter %{1%} %else %{0%} rocm=%if rocm %{1%} %else %{0%} cuda=%if cuda %{1%} %else %{0%} mfma=%if mfma %{1%} %else %{0%} nightly=%if nightly %{1%} %else %{0%} arch=%arch" | FileCheck %s
// CHECK: {{gpu=1 interpreter=0 rocm=1 cuda=0|gpu=1 interpreter=0 rocm=0 cuda=1 mfma=0|gpu=0 interpreter=1 rocm=0 cuda=0 mfma=0}}
