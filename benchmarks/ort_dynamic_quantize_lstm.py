"""ONNX Runtime's com.microsoft.DynamicQuantizeLSTM alone, at
ddddocr-common-old's LSTM shape (seq 32, batch 1, input 512, hidden 512,
bidirectional; int8 W and R, per-direction scales, zero points 0), on 1
thread: the peer figure for backends/onednn:rnn_int8_benchmark (decision
0074). Run with the corpus venv's python:

  ~/.cache/kiln/corpus-venv/bin/python benchmarks/ort_dynamic_quantize_lstm.py [runs]
"""
import numpy as np, onnx, onnxruntime as ort, time, sys
from onnx import helper, TensorProto, numpy_helper as nh
T,N,I,H,D=32,1,512,512,2
rng=np.random.default_rng(0)
W=rng.integers(-127,128,(D,I,4*H),dtype=np.int8)
R=rng.integers(-127,128,(D,H,4*H),dtype=np.int8)
inits=[nh.from_array(W,'W'),nh.from_array(R,'R'),nh.from_array((rng.standard_normal((D,8*H))*0.1).astype(np.float32),'B'),
 nh.from_array(np.full(D,0.0004,np.float32),'ws'),nh.from_array(np.zeros(D,np.int8),'wz'),
 nh.from_array(np.full(D,0.0004,np.float32),'rs'),nh.from_array(np.zeros(D,np.int8),'rz')]
node=helper.make_node('DynamicQuantizeLSTM',['X','W','R','B','','','','','ws','wz','rs','rz'],['Y'],domain='com.microsoft',hidden_size=H,direction='bidirectional')
g=helper.make_graph([node],'g',[helper.make_tensor_value_info('X',TensorProto.FLOAT,[T,N,I])],[helper.make_tensor_value_info('Y',TensorProto.FLOAT,None)],inits)
m=helper.make_model(g,opset_imports=[helper.make_opsetid('',17),helper.make_opsetid('com.microsoft',1)])
so=ort.SessionOptions(); so.intra_op_num_threads=1; so.inter_op_num_threads=1
s=ort.InferenceSession(m.SerializeToString(),so,providers=['CPUExecutionProvider'])
x=rng.standard_normal((T,N,I)).astype(np.float32)
for _ in range(3): s.run(None,{'X':x})
ts=[]
for _ in range(int(sys.argv[1]) if len(sys.argv)>1 else 9):
    t0=time.perf_counter(); s.run(None,{'X':x}); ts.append((time.perf_counter()-t0)*1e3)
print('ort DynamicQuantizeLSTM 1 thread median %.3f ms'%np.median(ts))
