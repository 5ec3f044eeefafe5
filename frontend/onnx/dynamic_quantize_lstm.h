// File: frontend/onnx/dynamic_quantize_lstm.h — ONNX Runtime's contrib op
// com.microsoft.DynamicQuantizeLSTM (what onnxruntime.quantization's
// quantize_dynamic writes for every LSTM) becomes a standard ONNX LSTM over
// its dequantized constant weights, before the importer checks ops
// (decisions 0071, 0074). Internal to frontend/onnx.
#ifndef KILN_FRONTEND_ONNX_DYNAMIC_QUANTIZE_LSTM_H_
#define KILN_FRONTEND_ONNX_DYNAMIC_QUANTIZE_LSTM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "frontend/onnx/graph_importer.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend::onnx_internal {

// Rewrites every com.microsoft.DynamicQuantizeLSTM node, in every graph, into
// an ONNX `LSTM` node (same name, inputs, outputs and attributes) whose W is
// a new f32 initializer: W[d, j, i] = (Wq[d, i, j] - zp[d, j']) *
// scale[d, j'], j' = j for per-column, 0 for per-direction parameters. R
// stays 8-bit where the model's opset can say so (decision 0074): it is the
// output of DequantizeLinear over Rq transposed to ONNX's [D, 4H, H] (per
// tensor when one scale and zero point cover it; per direction on axis 0 and
// per column of one direction on axis 1 from opset 13; below opset 13, two
// directions are one per-tensor DequantizeLinear each and a Concat), nodes
// inserted right before the LSTM; otherwise (per-column parameters of a
// bidirectional LSTM or below opset 13, any below opset 10) an f32
// initializer like W. Wq, Rq, their scales and zero points must be initializers (or
// Constant outputs) of the node's own graph; the quantized weights go away
// when nothing else reads them, and so does the 'com.microsoft' opset import
// when no node of that domain is left. `detached` holds the top-level
// initializers already read out of the proto. Bad input is InvalidArgument
// naming the node: inputs that are not constants, dtypes and shapes ONNX
// Runtime's schema or kernel refuses (W, R and both zero points one 8-bit
// type; scales f32 of shape [D] or [D, 4*hidden]; zero points of the scales'
// shape, per-column ones all 0 for int8 and all equal for uint8), attributes
// the contrib op does not have. Any other com.microsoft op is left alone.
absl::Status RewriteDynamicQuantizeLstm(onnx::ModelProto* model,
                                        const DetachedTensors& detached,
                                        absl::string_view base_dir,
                                        int64_t max_tensor_bytes);

}  // namespace kiln::frontend::onnx_internal

#endif  // KILN_FRONTEND_ONNX_DYNAMIC_QUANTIZE_LSTM_H_
