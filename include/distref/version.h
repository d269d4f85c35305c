/* distref — the version `distref --version` prints: DR_VERSION here, and
 * the git revision the build was made from when the Makefile knew it
 * (DR_GIT_REVISION, from build/<mode>/revision.h; "unknown" otherwise). */
#ifndef DISTREF_VERSION_H
#define DISTREF_VERSION_H

#define DR_VERSION "0.9.0"

#ifndef DR_GIT_REVISION
#define DR_GIT_REVISION "unknown"
#endif

#endif
