/* distref tests — a fresh temporary directory per test, removed with
 * everything in it (shared by the tests that write files). */
#ifndef DISTREF_TESTS_TMPDIR_H
#define DISTREF_TESTS_TMPDIR_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL) {
        unlink(path);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char child[4096];
        if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child)
            continue;   /* no such paths under our temporary directories */
        remove_tree(child);
    }
    closedir(d);
    rmdir(path);
}

/* cmocka setup: *state becomes a new directory made from templ
 * ("/tmp/distref_x_XXXXXX"); pair with drop_temp_dir. */
static inline int temp_dir_from(void **state, const char *templ)
{
    char *dir = malloc(strlen(templ) + 1);
    if (dir == NULL)
        return -1;
    strcpy(dir, templ);
    if (mkdtemp(dir) == NULL) {
        free(dir);
        return -1;
    }
    *state = dir;
    return 0;
}

static inline int drop_temp_dir(void **state)
{
    remove_tree(*state);
    free(*state);
    return 0;
}

#endif
