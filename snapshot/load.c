/*
 * load.c - open any snapshot file and pick its codec by content, never by extension.
 *
 * .cmh files are msgpack maps (first byte 0x80..0x8f or 0xde/0xdf); PyTorch pickles start with
 * PROTO (0x80) followed by a protocol byte.  The file is mapped read-only, so no second copy of
 * it is ever made.
 *
 * A command that needs only part of a snapshot says so (CMH_LOAD_*), and a reader may then stop
 * early: `stats` reads a pickle's segments, which PyTorch writes before its trace (in real
 * snapshots they end within the first few percent of the bytes); a .cmh's traces are skipped
 * over rather than kept (the checksum, when there is one, still covers every byte).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cumemhist/snapshot.h"
#include "mapped.h"

/* CUMEMHIST_GENERIC_LOAD=1: every load reads the whole file, whatever the command asked for; so
 * a test can hold what the shortcuts give against the full read of the same file. */
static unsigned load_flags(unsigned flags)
{
    const char *g = getenv("CUMEMHIST_GENERIC_LOAD");
    return g && *g && strcmp(g, "0") ? CMH_LOAD_GENERIC : flags;
}

int cmh_snapshot_load(const char *path, cmh_snapshot *s, char *err, size_t errlen)
{
    return cmh_snapshot_load_ex(path, s, 0, err, errlen);
}

int cmh_snapshot_load_ex(const char *path, cmh_snapshot *s, unsigned flags, char *err, size_t errlen)
{
    char msg[512];
    flags = load_flags(flags);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return CMH_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        return CMH_EIO;
    }
    cmh_input_opened(fd);
    if (!S_ISREG(st.st_mode)) { /* a directory, a pipe, a device: not a snapshot file */
        snprintf(err, errlen, "%s: %s", path, S_ISDIR(st.st_mode) ? "is a directory, not a snapshot" : "not a regular file (a snapshot is read from a file)");
        close(fd);
        return CMH_EIO;
    }
    size_t len = (size_t)st.st_size;
    if (len == 0) {
        close(fd);
        snprintf(err, errlen, "%s: empty file (truncated at byte 0)", path);
        return CMH_EFORMAT;
    }
    const unsigned char *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "%s: cannot map: %s", path, strerror(errno));
        return CMH_EIO;
    }
    int rc;
    if (p[0] == 0x80 && len > 1 && p[1] >= 2 && p[1] <= 5) {
        rc = cmh_pickle_read_mapped(p, len, flags, s, msg, sizeof msg);
    } else if (p[0] == 0x80) {
        rc = CMH_EFORMAT;
        snprintf(msg, sizeof msg, "unsupported pickle protocol %d at byte 1 (PyTorch writes 2 to 5)", len > 1 ? p[1] : -1);
    } else if ((p[0] & 0xf0) == 0x80 || p[0] == 0xde || p[0] == 0xdf) {
        rc = cmh_cmh_read_mapped(p, len, flags, s, msg, sizeof msg);
    } else if (p[0] == '{' || p[0] == '[') { /* `export -f json`'s or a --json output fed back (it said 'first byte 0x7b is neither ...') */
        rc = CMH_EFORMAT;
        snprintf(msg, sizeof msg, "not a snapshot: JSON (byte 0 is '%c'), an export format cumemhist writes and does not read back; "
                 "read the .cmh or pickle it came from", p[0]);
    } else if (len >= 8 && !memcmp(p, "CMHFLT01", 8)) { /* (it said 'first byte 0x43 is neither ...') */
        rc = CMH_EFORMAT;
        snprintf(msg, sizeof msg, "a flight record (the journal a recording process keeps), not a snapshot: `cumemhist recover "
                                  "FILE -o out.cmh` makes one of it (or `cumemhist top PID` while its process runs)");
    } else if (len >= 4 && !memcmp(p, "PK\x03\x04", 4)) { /* (a stranger's torch.save()d snapshot: 'first byte 0x50 is neither ...') */
        rc = CMH_EFORMAT;
        snprintf(msg, sizeof msg, "a zip archive, as torch.save() writes, not a snapshot: save PyTorch's with "
                                  "torch.cuda.memory._dump_snapshot(PATH), a plain pickle");
    } else if (len >= 2 && p[0] == 0x1f && p[1] == 0x8b) {
        rc = CMH_EFORMAT;
        snprintf(msg, sizeof msg, "gzip-compressed: uncompress it first (`gunzip -k FILE`, or `zcat FILE > snapshot.pickle`)");
    } else if ((p[0] == '(' || p[0] == '}' || p[0] == ']') && p[len - 1] == '.') {
        /* a pickle with no PROTO opcode: protocol 0 or 1 (pickle.dump(x, f, 0)), which PyTorch never writes */
        rc = CMH_EFORMAT;
        snprintf(msg, sizeof msg, "a pickle of protocol 0 or 1 (no PROTO opcode at byte 0); cumemhist reads protocols 2 to 5, "
                                  "PyTorch's: write it again with pickle.dump(obj, f, protocol=4)");
    } else {
        rc = CMH_EFORMAT;
        snprintf(msg, sizeof msg, "not a snapshot (first byte 0x%02x is neither a .cmh map nor a pickle PROTO)", p[0]);
    }
    munmap((void *)p, len);
    if (rc != CMH_OK) snprintf(err, errlen, "%s: %s", path, msg);
    return rc;
}
