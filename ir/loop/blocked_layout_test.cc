// The blocked layout helpers: a round trip through the blocked form (element
// places, zero channel tail), logical shapes, attribute checks, the logical
// view of a blocked call and the count of layout-reorder kernels.
#include "ir/loop/blocked_layout.h"

#include <vector>

#include "gtest/gtest.h"
#include "ir/graph/tensor.h"
#include "ir/loop/extern_schema.h"

namespace kiln::ir::loop {
namespace {

Tensor Iota(const Shape& shape) {
  Tensor t(DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = 1.0f + i;
  return t;
}

TEST(BlockedLayout, BlockRoundTripAndErrors) {
  const Tensor x = Iota({2, 5, 3, 2});
  absl::StatusOr<Tensor> b = ToBlocked(x, 4);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->shape(), (Shape{2, 2, 3, 2, 4}));
  // Element (n=1, c=4, h=2, w=1) at ((1*2 + 1)*6 + 2*2 + 1)*4 + 0; the
  // channel tail (c = 5..7) is zero.
  EXPECT_EQ(b->data<float>()[((1 * 2 + 1) * 6 + 2 * 2 + 1) * 4],
            x.data<float>()[((1 * 5 + 4) * 3 + 2) * 2 + 1]);
  EXPECT_EQ(b->data<float>()[((0 * 2 + 1) * 6 + 0) * 4 + 3], 0.0f);
  absl::StatusOr<Tensor> back = FromBlocked(*b, 5);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->shape(), x.shape());
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    ASSERT_EQ(back->data<float>()[i], x.data<float>()[i]) << i;
  }
  EXPECT_EQ(LogicalShape({2, 2, 3, 2, 4}, 5), (Shape{2, 5, 3, 2}));

  EXPECT_EQ(FromBlocked(*b, 9).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ToBlocked(Tensor(DType::kF32, {4, 4}), 8).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ToBlocked(Tensor(DType::kF32, {1, 4, 4}), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// u8 activations (int8 convs) in one block of their channel count: the
// channels-last layout, [N, 1, H, W, C]; round trip exact.
TEST(BlockedLayout, U8ChannelsLastRoundTrip) {
  Tensor x(DType::kU8, {2, 3, 2, 2});
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    x.data<uint8_t>()[i] = static_cast<uint8_t>(200 + i);
  }
  absl::StatusOr<Tensor> b = ToBlocked(x, 3);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->dtype(), DType::kU8);
  EXPECT_EQ(b->shape(), (Shape{2, 1, 2, 2, 3}));
  // (n=1, c=2, h=1, w=0) is NHWC element ((1*2 + 1)*2 + 0)*3 + 2.
  EXPECT_EQ(b->data<uint8_t>()[((1 * 2 + 1) * 2 + 0) * 3 + 2],
            x.data<uint8_t>()[((1 * 3 + 2) * 2 + 1) * 2 + 0]);
  absl::StatusOr<Tensor> back = FromBlocked(*b, 3);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->dtype(), DType::kU8);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    ASSERT_EQ(back->data<uint8_t>()[i], x.data<uint8_t>()[i]) << i;
  }
}

TEST(BlockedLayout, ChannelAttributes) {
  Kernel k;
  k.name = "k";
  k.kind = Kernel::Kind::kExtern;
  k.call.inputs = {0, 1};
  k.call.outputs = {2};
  absl::StatusOr<std::vector<int64_t>> plain = BlockedChannels(k, false);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, (std::vector<int64_t>{0, 0}));
  k.call.attrs[kAttrBlockedInputs] = std::vector<int64_t>{16};
  EXPECT_EQ(BlockedChannels(k, false).status().code(), absl::StatusCode::kInvalidArgument);
  k.call.attrs[kAttrBlockedInputs] = std::string("16,0");
  EXPECT_EQ(BlockedChannels(k, false).status().code(), absl::StatusCode::kInvalidArgument);
  k.call.attrs[kAttrBlockedOutputs] = std::vector<int64_t>{-1};
  EXPECT_EQ(BlockedChannels(k, true).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BlockedLayout, LogicalViewAndReorderCount) {
  LoopProgram p;
  Buffer x;
  x.name = "x";
  x.dtype = DType::kF32;
  x.shape = {1, 2, 4, 4, 8};  // 13 channels blocked by 8
  x.strides = RowMajorStrides(x.shape);
  Buffer w = x;
  w.name = "w";
  w.shape = {13, 13, 1, 1};
  w.strides = RowMajorStrides(w.shape);
  Buffer y = x;
  y.name = "y";
  p.buffers = {x, w, y};
  Kernel conv;
  conv.name = "conv";
  conv.kind = Kernel::Kind::kExtern;
  conv.call.op = "onnx.Conv";
  conv.call.inputs = {0, 1};
  conv.call.outputs = {2};
  conv.call.attrs[kAttrBlockedInputs] = std::vector<int64_t>{13, 0};
  conv.call.attrs[kAttrBlockedOutputs] = std::vector<int64_t>{13};
  conv.call.attrs[kAttrChannelBlock] = int64_t{8};
  absl::StatusOr<ExternLogicalView> view = LogicalViewForExtern(p, conv);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->program.buffers[0].shape, (Shape{1, 13, 4, 4}));
  EXPECT_EQ(view->program.buffers[0].strides, RowMajorStrides({1, 13, 4, 4}));
  EXPECT_EQ(view->program.buffers[1].shape, w.shape);
  EXPECT_EQ(view->program.buffers[2].shape, (Shape{1, 13, 4, 4}));
  EXPECT_EQ(view->kernel.call.attrs.count(kAttrBlockedInputs), 0u);
  EXPECT_EQ(view->kernel.call.attrs.count(kAttrChannelBlock), 0u);

  Kernel reorder;
  reorder.name = "to_plain";
  reorder.kind = Kernel::Kind::kLoop;
  reorder.description = std::string("copy") + kReorderTag;
  Kernel tail = reorder;
  tail.description = std::string("copy") + kReorderTailTag;
  p.kernels = {conv, reorder, tail};
  EXPECT_EQ(CountLayoutReorderKernels(p), 1);
}

}  // namespace
}  // namespace kiln::ir::loop
