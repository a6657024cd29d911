/*
 * torch_layout.h - PyTorch's layout on disk and in a snapshot (torch_layout.c): the facts
 * sites.c's rules ask of a path.  Private to analyzer/.
 */
#ifndef CMH_TORCH_LAYOUT_H
#define CMH_TORCH_LAYOUT_H

#include "cumemhist/snapshot.h"

/* PyTorch's package directories in this snapshot, for its Python rule: the "torch/" a file must
 * lie in to be PyTorch's.  An install's is any site-packages/torch/ (dist-packages/, Windows'
 * Lib\site-packages\torch\, as the rules read it); a source checkout's (an editable install,
 * a run from the repository) is no layout, so it is one only where the snapshot shows PyTorch's
 * own binaries or sources beside it: a module <dir>/torch/_C*.so or <dir>/torch/lib/libtorch*,
 * libc10* (Windows' torch_cpu.dll, c10.dll), a C++ frame of <dir>/torch/csrc/, or one of the
 * Python files every stack through PyTorch passes (<dir>/torch/nn/modules/module.py ...).  Any directory
 * named torch was taken for it: a user's /home/me/code/torch/train.py was PyTorch's, and its
 * allocations went to the package that called it. */
#define CMH_TORCH_ROOTS 8
typedef struct cmh_torch_roots {
    char dir[CMH_TORCH_ROOTS][512]; /* "/env/pytorch/torch/", "torch/" */
    int n;
} cmh_torch_roots;

/* The checkouts' (and installs') torch/ directories the snapshot's modules and frames show. */
void cmh_torch_roots_find(const cmh_snapshot *s, cmh_torch_roots *r);
/* A Python file of PyTorch's own package: under an installed torch/ or a checkout's torch/roots
 * says is PyTorch's. */
int cmh_torch_python(const char *file, const cmh_torch_roots *r);
/* PyTorch's C++ sources by their place in its repository, aten/src/, c10/{core,cuda,...}/,
 * torch/csrc/: a directory of that name at the start of the path or after a '/', and a C or C++
 * file (PyTorch has no Python there; a user's /home/me/c10/train.py is the user's). */
int cmh_torch_cpp_source(const char *file);
/* (PyTorch's own binaries: cmh_sites_torch_module, public in cumemhist/sites.h) */

#endif
