// The `kiln` command (tools/cli.h has what it does).
#include "tools/cli.h"

int main(int argc, char** argv) { return kiln::tools::run_command(argc, argv); }
