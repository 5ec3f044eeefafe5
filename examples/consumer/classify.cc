// File: examples/consumer/classify.cc — runs the AOT-compiled classifier on
// one binary PPM image (P6, the model's input height and width) and prints
// the top classes with their scores.
//   bazel run //:classify -- $PWD/sample.ppm
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "classifier.h"

namespace {

// Reads a P6 PPM with maxval 255 into planar floats in [0, 1] (CHW).
bool ReadPpm(const std::string& path, int64_t height, int64_t width, std::vector<float>* chw,
             std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open " + path;
    return false;
  }
  std::string magic;
  int64_t w = 0, h = 0, maxval = 0;
  in >> magic >> w >> h >> maxval;
  if (!in || magic != "P6" || maxval != 255) {
    *error = path + ": not a binary PPM (P6) with maxval 255";
    return false;
  }
  if (w != width || h != height) {
    std::ostringstream msg;
    msg << path << ": image is " << w << "x" << h << ", the model takes " << width << "x"
        << height;
    *error = msg.str();
    return false;
  }
  in.get();  // the single whitespace after maxval
  std::vector<unsigned char> rgb(static_cast<size_t>(3 * w * h));
  if (!in.read(reinterpret_cast<char*>(rgb.data()), static_cast<std::streamsize>(rgb.size()))) {
    *error = path + ": truncated pixel data";
    return false;
  }
  chw->assign(rgb.size(), 0.0f);
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t i = 0; i < h * w; ++i) (*chw)[c * h * w + i] = rgb[3 * i + c] / 255.0f;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: classify IMAGE.ppm\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<kiln::CompiledModel>> model =
      classifier::Create(kiln::CompileOptions{});  // the best ISA this CPU runs
  if (!model.ok()) {
    std::cerr << "classifier::Create: " << model.status() << "\n";
    return 1;
  }
  const kiln::TensorInfo& input = (*model)->inputs().at(0);  // 1x3xHxW
  if (input.shape.size() != 4 || input.shape[1] != 3) {
    std::cerr << "the model's input is not 1x3xHxW\n";
    return 1;
  }
  std::vector<float> pixels;
  std::string error;
  if (!ReadPpm(argv[1], input.shape[2], input.shape[3], &pixels, &error)) {
    std::cerr << error << "\n";
    return 2;
  }
  kiln::ir::Tensor image(kiln::ir::DType::kF32, input.shape);
  std::copy(pixels.begin(), pixels.end(), image.data<float>());

  std::vector<kiln::ir::Tensor> inputs;
  inputs.push_back(std::move(image));
  absl::StatusOr<std::vector<kiln::ir::Tensor>> outputs = (*model)->Run(inputs);
  if (!outputs.ok()) {
    std::cerr << "Run: " << outputs.status() << "\n";
    return 1;
  }
  const kiln::ir::Tensor& scores = outputs->at(0);
  const float* s = scores.data<float>();
  std::vector<int64_t> order(static_cast<size_t>(scores.num_elements()));
  std::iota(order.begin(), order.end(), 0);
  const size_t top = std::min<size_t>(3, order.size());
  std::partial_sort(order.begin(), order.begin() + top, order.end(),
                    [s](int64_t a, int64_t b) { return s[a] > s[b]; });
  std::cout << "isa " << (*model)->report().isa << "\n";
  for (size_t i = 0; i < top; ++i) {
    std::cout << "class " << order[i] << ": " << s[order[i]] << "\n";
  }
  return 0;
}
