# The exact reference for a quantized GGUF: the same file with every tensor dequantized by llama.cpp's own
# numpy dequantizer (gguf-py gguf.quants.dequantize) and written as F32 by gguf-py's GGUFWriter; llama.cpp's
# F32 forward of it is what an exact forward of the quantized weights must give.
#   PYTHONPATH=LLAMA_CPP/gguf-py python3 dequant.py IN.gguf OUT.gguf
import sys
import numpy as np
import gguf
r = gguf.GGUFReader(sys.argv[1])
arch = r.fields["general.architecture"].contents()
w = gguf.GGUFWriter(sys.argv[2], arch)
for k, f in r.fields.items():
    if k.startswith("GGUF.") or k == "general.architecture": continue
    sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
    w.add_key_value(k, f.contents(), f.types[0], sub)
for t in r.tensors:
    a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
    w.add_tensor(t.name, a.reshape([int(x) for x in reversed(t.shape)]))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
