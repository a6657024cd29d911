#!/usr/bin/env python3
"""torchdir_pickle.py OUT.pickle USERFILE [CHECKOUT] - a PyTorch snapshot whose user script lives at
USERFILE: main (USERFILE:358) allocates 16 x 16 MiB and get_input (USERFILE:206) 128 MiB, each
through torch.nn's Python and called by jsonargparse's _run_component, as a LightningCLI run does.

It is the case of a script in a folder named torch or c10 (/home/me/code/torch/train.py,
C:\\Users\\me\\torch\\train.py): the rule for PyTorch's Python took any directory named torch for
PyTorch's, so the user's frames were machinery and both sites were jsonargparse's one line.
CHECKOUT, a directory: PyTorch runs from a source checkout there (its torch/_C extension's C++
frame, torch/csrc/..., sits below torch/nn's), whose torch/ is PyTorch's by that sibling."""
import pickle
import sys

out, user = sys.argv[1], sys.argv[2]
checkout = sys.argv[3] if len(sys.argv) > 3 else None
MiB = 1 << 20
sep = '\\' if user[1:3] == ':\\' else '/'
if checkout:
    torch = [{'name': 'torch::autograd::THPVariable_linear', 'filename': checkout + '/torch/csrc/autograd/generated/python_nn_functions.cpp', 'line': 10},
             {'name': 'linear', 'filename': checkout + '/torch/nn/modules/linear.py', 'line': 125}]
elif sep == '\\':
    torch = [{'name': 'forward', 'filename': 'C:\\env\\Lib\\site-packages\\torch\\nn\\modules\\linear.py', 'line': 125}]
else:
    torch = [{'name': 'forward', 'filename': '/env/lib/python3.12/site-packages/torch/nn/modules/linear.py', 'line': 125}]
cli = {'name': '_run_component', 'filename': '/env/lib/python3.12/site-packages/jsonargparse/_cli.py', 'line': 227}


def fr(fn, line):
    return torch + [{'name': fn, 'filename': user, 'line': line}, cli]


b, t, tr, blocks, off = 1 << 40, 1000, [], [], 0
tr.append({'action': 'segment_alloc', 'addr': b, 'size': 512 * MiB, 'stream': 0, 'time_us': t, 'frames': fr('main', 358)})
for i, (size, fn, line) in enumerate([(16, 'main', 358)] * 16 + [(128, 'get_input', 206)]):
    tr.append({'action': 'alloc', 'addr': b + off, 'size': size * MiB, 'stream': 0, 'time_us': t + 10 * (i + 1), 'frames': fr(fn, line)})
    blocks.append({'address': b + off, 'size': size * MiB, 'requested_size': size * MiB, 'state': 'active_allocated', 'frames': fr(fn, line)})
    off += size * MiB
blocks.append({'address': b + off, 'size': 512 * MiB - off, 'requested_size': 0, 'state': 'inactive', 'frames': []})
seg = {'device': 0, 'address': b, 'total_size': 512 * MiB, 'allocated_size': off, 'active_size': off, 'requested_size': off,
       'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': fr('main', 358),
       'blocks': blocks}
pickle.dump({'segments': [seg], 'device_traces': [tr]}, open(out, 'wb'), protocol=4)
