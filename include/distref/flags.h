/* distref — command-line flags, absl-style, table-driven.
 *
 * `--name=value` and `--name value` both work; booleans also take a bare
 * `--name` (true) and `--noname` (false). Unknown flags, missing values,
 * malformed numbers and out-of-range values are DR_EUSAGE errors whose
 * message names the flag and what was expected: "--num_gpus: expected an
 * integer, got 'two'". A flag given twice is an error too.
 */
#ifndef DISTREF_FLAGS_H
#define DISTREF_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "distref/error.h"

typedef enum dr_flag_type {
    DR_FLAG_STRING,   /* dest: char[DR_FLAG_STR_MAX] */
    DR_FLAG_INT,      /* dest: int64_t, checked against [min, max] */
    DR_FLAG_DOUBLE,   /* dest: double, finite, checked against [min, max]; a NaN
                       * default means "not given" and shows as "unset" */
    DR_FLAG_BOOL      /* dest: bool */
} dr_flag_type;

#define DR_FLAG_STR_MAX 1024

typedef struct dr_flag {
    const char  *name;      /* without the leading dashes */
    dr_flag_type type;
    void        *dest;      /* holds the default on entry */
    double       min, max;  /* for INT and DOUBLE; min > max means unbounded */
    const char  *help;
    bool         seen;      /* set by the parser when the flag was given */
} dr_flag;

/* Parses argv[0..argc) (the arguments after the command). Returns DR_OK, or
 * DR_EUSAGE with the message in err. "--help" sets *help_requested and stops. */
int  dr_flags_parse(dr_flag *flags, int nflags, int argc, char **argv,
                    bool *help_requested, dr_err *err);

/* One line per flag: name, type, default, help. */
void dr_flags_usage(FILE *out, const dr_flag *flags, int nflags);

#endif
