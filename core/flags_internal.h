/* distref core — what core/flags.c, flags_usage.c and flags_file.c share. */
#ifndef DISTREF_CORE_FLAGS_INTERNAL_H
#define DISTREF_CORE_FLAGS_INTERNAL_H

#include "distref/flags.h"

const char *dr_flag_type_name(dr_flag_type t);
/* Whole numbers as integers, others as the shortest %g that reads back. */
void dr_flag_format_double(char *buf, size_t n, double v);
/* s is one of f->choices. */
bool dr_flag_choice_ok(const dr_flag *f, const char *s);
/* DR_EUSAGE: "--f: expected one of a, b, c; got 's'" (+ the nearest). */
int  dr_flag_choice_fail(const dr_flag *f, const char *s, dr_err *err);

#endif
