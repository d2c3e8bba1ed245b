// api.h — FRAMEJIT_API marks what the framejit_host shared library exports (everything else in
// framejit is built with hidden visibility).
#pragma once

#define FRAMEJIT_API __attribute__((visibility("default")))
