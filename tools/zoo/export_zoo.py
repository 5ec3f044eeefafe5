#!/usr/bin/python3
# File: tools/zoo/export_zoo.py — exports kiln's model zoo (torchvision CNNs,
# plain-torch transformers, an MLP and an LSTM; seeded random weights, no
# downloads) in the ONNX test layout, with PyTorch's outputs as expected data.
#
#   /usr/bin/python3 tools/zoo/export_zoo.py                 # whole zoo
#   /usr/bin/python3 tools/zoo/export_zoo.py --only resnet18,bert_base --force
#
# Layout: <out>/<name>/model.onnx, <out>/<name>/test_data_set_0/{input,output}_K.pb
# and <out>/zoo.json (name, suite, inputs, outputs, params, GFLOPs, opset).
# Needs Debian's python3-torch 1.13, python3-torchvision 0.14, python3-onnx.
import argparse
import json
import math
import os
import shutil
import sys
import time
import warnings
import zlib

import numpy as np
import onnx
import onnx.numpy_helper
import onnx.shape_inference
import torch
import torch.nn as nn
import torchvision.models as tvm

CNN_OPSET = 13
# LayerNormalization is an ONNX op from opset 17; torch 1.13 exports it
# natively there (decomposed into ReduceMean/Sub/Pow/... below 17).
LAYERNORM_OPSET = 17


# ---------------------------------------------------------------- transformers
class SelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)

    def forward(self, x, bias=None, keep=None):
        b, s, h = x.shape
        def split(t):
            return t.view(b, s, self.heads, self.head_dim).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if bias is not None:
            scores = scores + bias
        if keep is not None:
            scores = torch.where(keep, scores,
                                 torch.tensor(torch.finfo(torch.float32).min))
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        return self.out(ctx)


class EncoderLayer(nn.Module):
    """Post-LN BERT layer: attention, add & norm, FFN (erf GELU), add & norm."""

    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.attn = SelfAttention(hidden, heads)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ff1 = nn.Linear(hidden, ffn)
        self.act = nn.GELU()
        self.ff2 = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, bias):
        x = self.ln1(x + self.attn(x, bias=bias))
        return self.ln2(x + self.ff2(self.act(self.ff1(x))))


class BertLike(nn.Module):
    """BERT-base-like encoder: token + position (+ segment) embeddings from
    int64 input_ids, an attention mask input (1 keep, 0 pad), N post-LN
    layers, returns the last hidden state."""

    def __init__(self, layers, hidden=768, heads=12, ffn=3072, vocab=30522,
                 max_pos=512, segment_embedding=True):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_pos, hidden)
        self.segment = nn.Embedding(2, hidden) if segment_embedding else None
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(
            EncoderLayer(hidden, heads, ffn) for _ in range(layers))

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        pos = torch.arange(s, dtype=torch.int64).unsqueeze(0)
        x = self.word(input_ids) + self.pos(pos)
        if self.segment is not None:
            x = x + self.segment(torch.zeros_like(input_ids))
        x = self.ln(x)
        bias = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x


class DecoderLayer(nn.Module):
    """Pre-LN GPT-2 block with a causal mask and tanh GELU."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden, eps=1e-5)
        self.attn = SelfAttention(hidden, heads)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-5)
        self.ff1 = nn.Linear(hidden, 4 * hidden)
        self.act = nn.GELU(approximate="tanh")
        self.ff2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x, keep):
        x = x + self.attn(self.ln1(x), keep=keep)
        return x + self.ff2(self.act(self.ff1(self.ln2(x))))


class Gpt2Like(nn.Module):
    """GPT-2-small-like decoder: 12 pre-LN blocks, causal mask, LM head tied
    to the token embedding; returns logits."""

    def __init__(self, layers=12, hidden=768, heads=12, vocab=50257,
                 max_pos=1024):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(max_pos, hidden)
        self.blocks = nn.ModuleList(
            DecoderLayer(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=1e-5)
        self.register_buffer(
            "causal", torch.tril(torch.ones(max_pos, max_pos, dtype=torch.bool)))

    def forward(self, input_ids):
        s = input_ids.shape[1]
        pos = torch.arange(s, dtype=torch.int64).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(pos)
        keep = self.causal[:s, :s][None, None, :, :]
        for block in self.blocks:
            x = block(x, keep)
        return torch.matmul(self.ln_f(x), self.wte.weight.t())


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(),
                                 nn.Linear(512, 256), nn.ReLU(),
                                 nn.Linear(256, 10))

    def forward(self, x):
        return self.net(x)


class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(input_size=64, hidden_size=128, num_layers=2)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        return y, h, c


# ---------------------------------------------------------------- zoo table
def image_input():
    return [("input", torch.randn(1, 3, 224, 224))]


def token_inputs(vocab, seq=128, pad=16, with_mask=True):
    ids = torch.randint(0, vocab, (1, seq), dtype=torch.int64)
    if not with_mask:
        return [("input_ids", ids)]
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[:, seq - pad:] = 0
    return [("input_ids", ids), ("attention_mask", mask)]


def tv(fn, **kw):
    return lambda: fn(weights=None, **kw)


# name -> (suite, model factory, input factory, opset, output names)
ZOO = {
    "resnet18": ("cnn", tv(tvm.resnet18), image_input, CNN_OPSET, ["logits"]),
    "resnet50": ("cnn", tv(tvm.resnet50), image_input, CNN_OPSET, ["logits"]),
    "mobilenet_v2": ("cnn", tv(tvm.mobilenet_v2), image_input, CNN_OPSET, ["logits"]),
    "mobilenet_v3_large": ("cnn", tv(tvm.mobilenet_v3_large), image_input, CNN_OPSET, ["logits"]),
    "efficientnet_b0": ("cnn", tv(tvm.efficientnet_b0), image_input, CNN_OPSET, ["logits"]),
    "squeezenet1_1": ("cnn", tv(tvm.squeezenet1_1), image_input, CNN_OPSET, ["logits"]),
    "shufflenet_v2_x1_0": ("cnn", tv(tvm.shufflenet_v2_x1_0), image_input, CNN_OPSET, ["logits"]),
    "regnet_y_400mf": ("cnn", tv(tvm.regnet_y_400mf), image_input, CNN_OPSET, ["logits"]),
    "convnext_tiny": ("cnn", tv(tvm.convnext_tiny), image_input, LAYERNORM_OPSET, ["logits"]),
    "densenet121": ("cnn", tv(tvm.densenet121), image_input, CNN_OPSET, ["logits"]),
    "mnasnet1_0": ("cnn", tv(tvm.mnasnet1_0), image_input, CNN_OPSET, ["logits"]),
    "googlenet": ("cnn", tv(tvm.googlenet, aux_logits=False, init_weights=True),
                  image_input, CNN_OPSET, ["logits"]),
    "vit_b_16": ("transformer", tv(tvm.vit_b_16), image_input, LAYERNORM_OPSET, ["logits"]),
    "swin_t": ("transformer", tv(tvm.swin_t), image_input, LAYERNORM_OPSET, ["logits"]),
    "bert_base": ("transformer", lambda: BertLike(layers=12),
                  lambda: token_inputs(30522), LAYERNORM_OPSET, ["last_hidden_state"]),
    "distilbert": ("transformer",
                   lambda: BertLike(layers=6, segment_embedding=False),
                   lambda: token_inputs(30522), LAYERNORM_OPSET, ["last_hidden_state"]),
    # distilbert with a dynamic sequence length (dim 1 of the inputs and the
    # output is the symbol 'sequence'): the model for dynamic input shapes.
    "distilbert_dynseq": ("transformer",
                          lambda: BertLike(layers=6, segment_embedding=False),
                          lambda: token_inputs(30522), LAYERNORM_OPSET, ["last_hidden_state"]),
    "gpt2": ("transformer", lambda: Gpt2Like(),
             lambda: token_inputs(50257, with_mask=False), LAYERNORM_OPSET, ["logits"]),
    "mlp": ("misc", Mlp, lambda: [("input", torch.randn(1, 784))], CNN_OPSET, ["logits"]),
    "lstm": ("misc", Lstm, lambda: [("input", torch.randn(16, 1, 64))], CNN_OPSET,
             ["output", "h_n", "c_n"]),
}


GRAD_FOR_EXPORT = {"vit_b_16"}

# Models exported with symbolic dims: name -> torch.onnx.export's dynamic_axes.
DYNAMIC_AXES = {
    "distilbert_dynseq": {"input_ids": {1: "sequence"}, "attention_mask": {1: "sequence"},
                          "last_hidden_state": {1: "sequence"}},
}


# ---------------------------------------------------------------- helpers
def seed_for(name, base):
    return (base + zlib.crc32(name.encode())) % (2**31)


def calibrate_batchnorm(model, make_inputs):
    """Random init leaves BatchNorm at mean 0 / var 1, which makes it a no-op
    that BN folding bugs cannot show. Set running stats from a few random
    batches (train mode, cumulative average) and perturb the affine params."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(2):
            batch = [torch.cat([t, torch.randn_like(t)]) for _, t in make_inputs()]
            model(*batch)
        for bn in bns:
            if bn.affine:
                bn.weight.uniform_(0.8, 1.2)
                bn.bias.normal_(0.0, 0.05)
    model.eval()


def reinit_zero_weights(model):
    """Some inits zero whole layers (torchvision's ViT head): the output would
    then be constant and any kernel would match it. Give them small random
    weights instead."""
    with torch.no_grad():
        for m in model.modules():
            w = getattr(m, "weight", None)
            if (isinstance(m, (nn.Linear, nn.Conv2d)) and w is not None
                    and not w.any()):
                nn.init.normal_(w, std=0.02)
                if m.bias is not None:
                    nn.init.normal_(m.bias, std=0.02)


def perturb_layernorm(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm) and m.elementwise_affine:
                m.weight.uniform_(0.8, 1.2)
                m.bias.normal_(0.0, 0.05)


def count_params(model):
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


def gflops(model_proto):
    """Multiply-add FLOPs (x2) of Conv, MatMul, Gemm and LSTM, from ONNX shape
    inference; elementwise work is not counted."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model_proto)
    except Exception:  # noqa: BLE001 — FLOPs are best effort
        return None
    g = inferred.graph
    shapes = {}
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        tt = vi.type.tensor_type
        if tt.HasField("shape") and all(d.HasField("dim_value")
                                        for d in tt.shape.dim):
            dims = tt.shape.dim
            shapes[vi.name] = [d.dim_value for d in dims]
    for init in g.initializer:
        shapes[init.name] = list(init.dims)
    total = 0
    for node in g.node:
        try:
            if node.op_type == "Conv":
                w, y = shapes[node.input[1]], shapes[node.output[0]]
                total += 2 * np.prod(y) * np.prod(w[1:])
            elif node.op_type == "MatMul":
                a, y = shapes[node.input[0]], shapes[node.output[0]]
                total += 2 * np.prod(y) * a[-1]
            elif node.op_type == "Gemm":
                y, b = shapes[node.output[0]], shapes[node.input[1]]
                trans_b = any(a.name == "transB" and a.i for a in node.attribute)
                total += 2 * np.prod(y) * (b[1] if trans_b else b[0])
            elif node.op_type == "LSTM":
                x, w, r = (shapes[node.input[i]] for i in range(3))
                dirs, four_h, inp = w
                total += 2 * x[0] * x[1] * dirs * four_h * (inp + r[2])
        except (KeyError, IndexError, ValueError):
            return None
    return round(float(total) / 1e9, 3)


def tensor_entry(name, t):
    return {"name": name, "dtype": str(t.dtype).replace("torch.", ""),
            "shape": list(t.shape)}


def write_tensor(path, name, t):
    proto = onnx.numpy_helper.from_array(t.detach().cpu().numpy(), name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def export_one(name, out_root, base_seed):
    suite, make_model, make_inputs, opset, output_names = ZOO[name]
    seed = seed_for(name, base_seed)
    torch.manual_seed(seed)
    model = make_model()
    model.eval()
    reinit_zero_weights(model)
    calibrate_batchnorm(model, make_inputs)
    perturb_layernorm(model)
    torch.manual_seed(seed + 1)
    inputs = make_inputs()
    names = [n for n, _ in inputs]
    args = tuple(t for _, t in inputs)
    # Under no_grad, eval-mode nn.MultiheadAttention takes a fused fast path
    # (aten::_native_multi_head_attention) that torch 1.13 cannot export:
    # models in GRAD_FOR_EXPORT run, and export, with autograd on.
    grad = name in GRAD_FOR_EXPORT
    with torch.set_grad_enabled(grad):
        outs = model(*args)
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    for o in outs:
        if o.is_floating_point() and not torch.isfinite(o).all():
            raise RuntimeError(f"{name}: PyTorch output is not finite")

    final = os.path.join(out_root, name)
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "test_data_set_0"))
    model_path = os.path.join(tmp, "model.onnx")
    with torch.set_grad_enabled(grad):
        torch.onnx.export(model, args, model_path, opset_version=opset,
                          do_constant_folding=True, input_names=names,
                          output_names=output_names,
                          dynamic_axes=DYNAMIC_AXES.get(name))
    data = os.path.join(tmp, "test_data_set_0")
    for i, (n, t) in enumerate(inputs):
        write_tensor(os.path.join(data, f"input_{i}.pb"), n, t)
    for i, (n, t) in enumerate(zip(output_names, outs)):
        write_tensor(os.path.join(data, f"output_{i}.pb"), n, t)

    proto = onnx.load(model_path)
    onnx.checker.check_model(proto)
    entry = {
        "name": name,
        "suite": suite,
        "opset": opset,
        "seed": seed,
        "inputs": [tensor_entry(n, t) for n, t in inputs],
        "outputs": [tensor_entry(n, t) for n, t in zip(output_names, outs)],
        "params": count_params(model),
        "gflops": gflops(proto),
        "model_bytes": os.path.getsize(model_path),
        "num_nodes": len(proto.graph.node),
        "ops": sorted({n.op_type for n in proto.graph.node}),
        "torch": torch.__version__,
    }
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    return entry


def default_out():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "kiln", "zoo")


def main():
    p = argparse.ArgumentParser(
        description="Export kiln's model zoo in the ONNX test layout.")
    p.add_argument("--out", default=default_out(),
                   help="zoo folder (default: $XDG_CACHE_HOME/kiln/zoo or "
                        "~/.cache/kiln/zoo)")
    p.add_argument("--only", default="",
                   help="comma-separated model names (default: all)")
    p.add_argument("--force", action="store_true",
                   help="re-export models that already exist")
    p.add_argument("--seed", type=int, default=0, help="base seed")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: the machine is shared)")
    p.add_argument("--list", action="store_true", help="list the zoo and exit")
    args = p.parse_args()

    if args.list:
        for n, (suite, *_rest) in ZOO.items():
            print(f"{n:22s} {suite}")
        return 0
    names = list(ZOO) if not args.only else [s for s in args.only.split(",") if s]
    unknown = [n for n in names if n not in ZOO]
    if unknown:
        print(f"export_zoo: unknown model(s): {', '.join(unknown)}; "
              f"known: {', '.join(ZOO)}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    os.makedirs(args.out, exist_ok=True)
    manifest_path = os.path.join(args.out, "zoo.json")
    manifest = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = {m["name"]: m for m in json.load(f).get("models", [])}

    failed = []
    t_all = time.time()
    for i, name in enumerate(names, 1):
        done = os.path.exists(os.path.join(args.out, name, "model.onnx"))
        if done and name in manifest and not args.force:
            print(f"[{i}/{len(names)}] {name}: already exported, skipping "
                  f"(--force to redo)", flush=True)
            continue
        print(f"[{i}/{len(names)}] {name}: exporting ...", end="", flush=True)
        t0 = time.time()
        try:
            entry = export_one(name, args.out, args.seed)
        except Exception as e:  # noqa: BLE001 — report and go on
            shutil.rmtree(os.path.join(args.out, name + ".tmp"), ignore_errors=True)
            print(f" FAILED: {type(e).__name__}: {e}", flush=True)
            failed.append(name)
            continue
        entry["export_seconds"] = round(time.time() - t0, 1)
        manifest[name] = entry
        print(f" {entry['model_bytes'] / 1e6:.1f} MB, {entry['params'] / 1e6:.2f}M "
              f"params, {entry['gflops']} GFLOPs, {entry['num_nodes']} nodes, "
              f"{entry['export_seconds']} s", flush=True)
        with open(manifest_path + ".tmp", "w") as f:
            json.dump({"models": [manifest[n] for n in ZOO if n in manifest]},
                      f, indent=1)
        os.replace(manifest_path + ".tmp", manifest_path)

    print(f"done in {time.time() - t_all:.0f} s; zoo at {args.out}"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
