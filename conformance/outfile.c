/* distref conformance — an output file written whole or not at all.
 *
 * The text is built in memory (open_memstream) and then handed to
 * core/fileio.c's dr_write_atomic: a temporary file, fsync, rename. A reader
 * (a browser, CI reading junit.xml, gnuplot) never sees half a report, and
 * a run that stops midway leaves the previous file in place.
 *
 *   outfile o;
 *   FILE *f = outfile_open(&o);
 *   if (f) { fprintf(f, ...); rc = outfile_commit(&o, path); }
 */
#include "conformance/conformance.h"
#include "distref/fileio.h"

#include <stdlib.h>

FILE *outfile_open(outfile *o)
{
    o->text = NULL;
    o->n = 0;
    o->f = open_memstream(&o->text, &o->n);
    if (!o->f) fprintf(stderr, "conformance: out of memory for an output file\n");
    return o->f;
}

int outfile_commit(outfile *o, const char *path)
{
    dr_err err;
    int rc = 0;
    if (fclose(o->f) != 0) {
        fprintf(stderr, "conformance: could not write %s: out of memory\n", path);
        rc = 1;
    } else if (dr_write_atomic(path, o->text, o->n, &err) != DR_OK) {
        fprintf(stderr, "conformance: %s\n", err.msg);
        rc = 1;
    }
    free(o->text);
    o->f = NULL;
    o->text = NULL;
    return rc;
}
