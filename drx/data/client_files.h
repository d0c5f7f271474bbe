#pragma once
// The clients of a MapReduce form on disk: one folder per client, named by
// its index, holding NAME.npy for each of its values (the layout `drx fedavg
// --export-rounds` writes under clients/ and `drx aggregate` reads), and the
// executor that runs the clients' work on them.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "drx/export/mapreduce_driver.h"

namespace drx::data {

// The client folders in `dir`, indexed by client: the subfolders named by a
// client's index 0..clients-1. Anything else in `dir` is named on `warn`
// (a folder meant as a client's but misnamed would otherwise just be
// missing) and skipped. drx::Error "<op>: ..." when `dir` is not a folder, a
// folder's index is out of range, a client has two folders (3 and 03) or
// none.
std::vector<std::string> client_folders(const std::string& dir, int64_t clients,
                                        const std::string& op, std::ostream& warn);

// The file of the value `name` in a folder: NAME.npy (a '/' in NAME is a
// subfolder).
std::string value_file(const std::string& folder, const std::string& name);

// Client `client`'s value `name` from `file`, which must hold exactly `type`.
// drx::Error "<op>: client I: ..." naming the file when it is missing,
// unreadable or of another dtype or shape.
Array load_client_value(const std::string& file, const Type& type, const std::string& name,
                        int64_t client, const std::string& op);

// A .npy file that must hold exactly `type`; drx::Error "<op>: ..." naming
// the file, the value `name` and the type expected.
Array load_value(const std::string& file, const Type& type, const std::string& name,
                 const std::string& op);

// Runs the clients' work (compiled, in this process, as
// InProcessClientExecutor does) on each client's data read from its folder,
// client_folders(clients_dir, ...)[i]/NAME.npy; checks on construction that
// every client has a file for each of its data. With `outputs_dir`, also
// writes client i's outputs of stage S to OUTPUTS/stageS/i/NAME.npy (what
// `drx aggregate --clients OUTPUTS/stageS` reads).
class FileClientExecutor : public CompiledClientExecutor {
 public:
  FileClientExecutor(const MapReduceForm& form, const std::string& clients_dir, std::ostream& warn,
                     std::string outputs_dir = "", std::string op = "mapreduce run");

 protected:
  Array client_data(const ClientStage& stage, int64_t client, const std::string& name) override;
  void finished(const ClientStage& stage, int64_t client,
                const std::vector<Array>& outputs) override;

 private:
  std::vector<std::string> folders_;
  std::string outputs_dir_, op_;
};

}  // namespace drx::data
