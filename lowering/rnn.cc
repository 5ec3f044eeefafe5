// File: lowering/rnn.cc — lowerings of ONNX's rnn family (onnx/defs/rnn):
// LSTM, GRU and RNN are library calls (extern kernels).
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {

void AddRnnLowerings(LowerTable& t) {
  for (const char* op : {"LSTM", "GRU", "RNN"}) t.AddExternCall(op);
}

}  // namespace kiln::lowering::internal
