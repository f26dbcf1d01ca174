#!/usr/bin/env python3
"""Generates the MPI_File_* wrappers of one MPI flavour.

The list of functions comes from the MPI library's exported symbols
(`nm -D`), the prototypes from that flavour's preprocessed mpi.h, so each
flavour gets exactly the surface its library exports (MPICH's large-count
`_c` variants included). Every wrapper sends non-Weft handles to PMPI
untouched; a Weft handle goes to `weft_impl_<name>` when implemented
(a `_c` variant of an implemented read/write uses the same function, whose
count parameter is `long long`) and otherwise to `weft_unsupported`, which
raises MPI_ERR_UNSUPPORTED_OPERATION. A Weft handle never reaches PMPI.
Each function is defined twice with the same body, as MPI_File_X and as
PMPI_File_X (programs calling PMPI directly, OpenMPI's Fortran bindings);
the MPI library's own PMPI_File_X is weft_real_PMPI_File_X, resolved once
with dlsym(RTLD_NEXT), and real.h redirects the C sources' PMPI_File_X
calls to it.

usage: gen_wrappers.py MPICC LIBMPI OUT_DIR C_DIR
writes OUT_DIR/wrappers.c, OUT_DIR/real.h, OUT_DIR/exports.map and OUT_DIR/functions.txt
(each function with how it is served: implemented, handwritten or
unsupported; tests/mpi.rs requires that none is unsupported).
"""
import os
import re
import subprocess
import sys

# Written by hand in c/weft_mpiio.c (no handle argument, or special).
HANDWRITTEN = {"MPI_File_open", "MPI_File_delete", "MPI_File_c2f", "MPI_File_f2c",
               "MPI_File_create_errhandler"}
# Non-file MPI functions the C layer intercepts: Weft requests complete on
# the application's thread (c/nonblocking.c); MPI_Init and MPI_Init_thread
# set the MPI_COMM_SELF attribute whose delete callback closes files at
# finalize (c/lifecycle.c).
REQUEST_HOOKS = ["MPI_Wait", "MPI_Test", "MPI_Waitall", "MPI_Testall", "MPI_Waitany", "MPI_Testany",
                 "MPI_Waitsome", "MPI_Testsome", "MPI_Request_get_status", "MPI_Request_free", "MPI_Init",
                 "MPI_Init_thread",
                 # c/datarep.c: user data representations for Weft files.
                 "MPI_Register_datarep"]
# POSIX calls the C layer interposes on `weft:` names (c/posix.c; all other
# names go to libc): the probes of PnetCDF and similar libraries.
POSIX_HOOKS = ["open", "open64", "__open_2", "__open64_2", "access", "truncate", "truncate64", "close", "fsync",
               "fdatasync", "stat", "lstat", "stat64", "lstat64",
               # names (issue 23): namespace calls, fopen for reading, directory streams
               "unlink", "remove", "rename", "mkdir", "statvfs", "statvfs64", "statfs", "statfs64", "fopen",
               "fopen64", "opendir", "readdir", "readdir64", "closedir", "rewinddir", "dirfd",
               # c/pnetcdf.c: PnetCDF calls whose POSIX probes use the name stripped of `weft:`
               "ncmpi_create", "ncmpi_open", "ncmpi_inq_file_format"]
# Implemented for Weft handles: every `int weft_impl_<name>(` defined in the
# C layer's sources (c/*.c), discovered so that a new source file needs no
# edit here.
def implemented(c_dir):
    found = set()
    for entry in sorted(os.listdir(c_dir)):
        if entry.endswith(".c"):
            with open(os.path.join(c_dir, entry)) as f:
                found.update(re.findall(r"^int\s+weft_impl_(MPI_File_\w+)\s*\(", f.read(), re.M))
    return found


def same_but_count(protos, name, base):
    """Whether the `_c` variant `name` differs from `base` only in its count type."""
    if base not in protos:
        return False
    a, b = params(protos[name][1]), params(protos[base][1])
    if len(a) != len(b):
        return False
    for (ta, na, _), (tb, nb, _) in zip(a, b):
        if na != nb:
            return False
        if ta != tb and not (na == "count" and ta == "MPI_Count" and tb == "int"):
            return False
    return True


def exported(libmpi):
    out = subprocess.run(["nm", "-D", "--defined-only", libmpi], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TW" and parts[2].startswith("MPI_File_"):
            names.add(parts[2])
    return sorted(names)


def prototypes(mpicc):
    src = "#include <mpi.h>\n"
    text = subprocess.run([mpicc, "-E", "-x", "c", "-"], input=src, check=True, capture_output=True, text=True).stdout
    text = " ".join(l for l in text.splitlines() if not l.startswith("#"))
    text = re.sub(r"\s+", " ", text)
    found = {}
    for m in re.finditer(r"\b(int|MPI_Fint|MPI_File)\s+(MPI_File_\w+)\s*\(([^()]*)\)", text):
        found.setdefault(m.group(2), (m.group(1), m.group(3).strip()))
    return found


def params(text):
    if text in ("", "void"):
        return []
    result = []
    for i, p in enumerate(text.split(",")):
        p = p.strip()
        m = re.match(r"^(.*?)(\w+)\s*(\[\s*\])?$", p)
        name = m.group(2) if m else ""
        typ = (m.group(1) + ("*" if m.group(3) else "")).strip() if m else p
        if not typ or not name or name.startswith("MPI_") or name in ("int", "char", "void", "long"):
            typ, name = p, "a%d" % i
            decl = "%s %s" % (p, name)
        else:
            decl = p
        result.append((typ.replace("const", "").replace(" ", ""), name, decl))
    return result


def handle_expr(ps):
    for typ, name, _ in ps:
        if typ == "MPI_File":
            return name
        if typ == "MPI_File*":
            return "(%s ? *%s : MPI_FILE_NULL)" % (name, name)
    return None


def main():
    mpicc, libmpi, out_dir, c_dir = sys.argv[1:5]
    IMPLEMENTED = implemented(c_dir)
    os.makedirs(out_dir, exist_ok=True)
    names = exported(libmpi)
    protos = prototypes(mpicc)
    lines = ["/* Generated by tools/gen_wrappers.py from %s and %s's mpi.h. Do not edit. */" % (libmpi, mpicc),
             "#define WEFT_WRAPPERS_C /* define PMPI_File_* here: no redirection to weft_real_* */",
             "#ifndef _GNU_SOURCE", "#define _GNU_SOURCE", "#endif", "#include <dlfcn.h>", "#include <stdio.h>",
             "#include <stdlib.h>", "#include <mpi.h>", '#include "weft_mpiio_internal.h"', ""]
    # real.h: the MPI library's own PMPI_File_* through weft_real_PMPI_File_*
    # (the C layer's sources call PMPI_File_X, redirected there by a macro).
    real = ["/* Generated by tools/gen_wrappers.py. Do not edit. */", "#ifndef WEFT_REAL_H", "#define WEFT_REAL_H",
            "#include <mpi.h>"]
    decls, listing, entries = [], [], []
    for name in names:
        if name not in protos:
            sys.exit("no prototype for exported %s" % name)
        ret, ptext = protos[name]
        ps = params(ptext)
        args = ", ".join(n for _, n, _ in ps)
        pdecl = ", ".join(d for _, _, d in ps) or "void"
        # The MPI library's PMPI_File_X, resolved once with dlsym(RTLD_NEXT):
        # once this library exports PMPI_File_X, a plain call to it from
        # here would bind to itself.
        real += ["%s weft_real_P%s(%s);" % (ret, name, pdecl),
                 "#ifndef WEFT_WRAPPERS_C", "#define P%s weft_real_P%s" % (name, name), "#endif"]
        lines += ["%s weft_real_P%s(%s) {" % (ret, name, pdecl),
                  "    static %s (*next)(%s);" % (ret, pdecl),
                  "    %s (*fn)(%s) = __atomic_load_n(&next, __ATOMIC_ACQUIRE);" % (ret, pdecl),
                  "    if (!fn) {",
                  '        *(void **)&fn = dlsym(RTLD_NEXT, "P%s");' % name,
                  '        if (!fn) { fprintf(stderr, "libweft_mpiio: P%s not found in the MPI library\\n"); abort(); }' % name,
                  "        __atomic_store_n(&next, fn, __ATOMIC_RELEASE);",
                  "    }",
                  "    return fn(%s);" % args,
                  "}", ""]
        # Both entry points, MPI_File_X and PMPI_File_X, run the same body:
        # programs (and OpenMPI's Fortran bindings) calling PMPI directly
        # reach Weft too.
        body = "weft_hw_%s" % name if name in HANDWRITTEN else "weft_wrap_%s" % name
        entries += ["%s %s(%s) { return %s(%s); }" % (ret, name, pdecl, body, args),
                    "%s P%s(%s) { return %s(%s); }" % (ret, name, pdecl, body, args)]
        if name in HANDWRITTEN:
            real.append("%s weft_hw_%s(%s); /* c/weft_mpiio.c */" % (ret, name, pdecl))
            listing.append("%s handwritten" % name)
            continue
        handle = handle_expr(ps)
        if ret != "int" or handle is None:
            sys.exit("cannot wrap %s (returns %s)" % (name, ret))
        base = name[:-2] if name.endswith("_c") else name
        # A function implemented under its own name, or a `_c` variant
        # served by its int-count base (whose count parameter is long long).
        impl = name if name in IMPLEMENTED else None
        if impl is None and name.endswith("_c") and base in IMPLEMENTED and same_but_count(protos, name, base):
            impl = base
        if impl is not None:
            target = "weft_impl_%s(%s)" % (impl, args)
            listing.append("%s implemented" % name)
            if impl not in decls:
                decls.append(impl)
        else:
            target = 'weft_unsupported(weft_file_, "%s")' % name
            listing.append("%s unsupported" % name)
        # A handle Weft closed at finalize (c/lifecycle.c) is refused, except
        # by close, which accepts it (weft_impl_MPI_File_close).
        retired = "" if name == "MPI_File_close" else 'if (weft_file_->retired) return weft_retired_call(weft_file_, "%s"); ' % name
        lines += ["static int weft_wrap_%s(%s) {" % (name, pdecl),
                  "    weft_file *weft_file_ = weft_find(%s);" % handle,
                  "    if (weft_file_) { %sreturn %s; }" % (retired, target),
                  "    return weft_real_P%s(%s);" % (name, args),
                  "}", ""]
    lines += entries + [""]
    real += ["#endif", ""]
    with open(os.path.join(out_dir, "real.h"), "w") as f:
        f.write("\n".join(real))
    # Prototypes of the implementations, taken from the int-count variants.
    header = []
    for base in decls:
        ret, ptext = protos[base]
        ps = params(ptext)
        ds = []
        for typ, n, d in ps:
            ds.append("long long %s" % n if n == "count" else d)
        header.append("int weft_impl_%s(%s);" % (base, ", ".join(ds)))
    lines[11:11] = header + [""]
    with open(os.path.join(out_dir, "wrappers.c"), "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(out_dir, "exports.map"), "w") as f:
        f.write("{\n  global:\n    MPI_File_*;\n    PMPI_File_*;\n    weft_mpiio_*;\n    %s;\n  local:\n    *;\n};\n"
                % ";\n    ".join(REQUEST_HOOKS + POSIX_HOOKS))
    with open(os.path.join(out_dir, "functions.txt"), "w") as f:
        f.write("\n".join(listing) + "\n")


main()
