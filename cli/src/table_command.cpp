// The start that the table commands (kernels, collectives) share.
#include "tessera/cli/args.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/files.hpp"

namespace tessera::cli {

TableCommand parse_table_command(const std::vector<std::string>& args, const std::string& command) {
  ArgParser p("tessera " + command);
  p.option("out").flag("json");
  declare_scenario_options(p);
  std::vector<std::string> sets;
  p.parse(take_set_options(args, sets));
  p.expect_positional(1, "a scenario file");
  TableCommand c{load_scenario(p.positional()[0], scenario_overrides(sets, p)), p.get("out"), p.has("json")};
  study::require_single_job(c.scenario, command);
  print_scenario_warnings(c.scenario);
  // --out may be neither the scenario nor its measured kernel times.
  FileSet files;
  files.input(p.positional()[0], "the scenario");
  if (c.scenario.kernel_overrides) files.input(c.scenario.kernel_overrides->path(), "node_model.overrides");
  if (c.out) files.output(*c.out, "--out");
  return c;
}

}  // namespace tessera::cli
