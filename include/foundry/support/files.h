// Opening input files that may be anything the file system holds: open(2) of a FIFO waits for a
// writer forever, and a device or socket is no file to read a model from.
#pragma once
#include <string>

namespace foundry {

// Opens `path` read-only without waiting (O_NONBLOCK, so a FIFO with no writer does not block)
// and returns the descriptor when it is a regular file. Otherwise returns -1 and sets `error`:
// strerror's text, or "not a regular file (a FIFO)" and the like.
int open_regular_file(const std::string& path, std::string& error);

// What kind of file `mode` (stat's st_mode) describes: "a FIFO", "a folder", "a socket"...
std::string file_kind(unsigned mode);

}  // namespace foundry
