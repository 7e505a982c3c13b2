#include "jobman/remote/setup.hpp"

#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <memory>
#include <openssl/evp.h>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <unistd.h>

namespace jobman::remote {

namespace fs = std::filesystem;

namespace {

// Hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    throw Error("SHA-256 failed");
  }
  std::string hex;
  hex.reserve(static_cast<std::size_t>(length) * 2);
  for (unsigned int i = 0; i < length; ++i) {
    char byte[3];
    std::snprintf(byte, sizeof byte, "%02x", digest[i]);
    hex += byte;
  }
  return hex;
}

// Splits gcsfuse.flags entries into words and quotes each: "--uid 1000" is two words, as the Python jobman read
// them, and no flag text is ever evaluated by the worker's shell.
std::string quoted_words(const std::vector<std::string>& flags) {
  std::string out;
  for (const auto& flag : flags) {
    std::istringstream words(flag);
    std::string word;
    while (words >> word) {
      out += " " + shell_quote(word);
    }
  }
  return out;
}

// A name the shell and docker take for an environment variable: letters, digits and '_', not starting with a digit.
bool is_variable_name(const std::string& name) {
  return !name.empty() && std::isdigit(static_cast<unsigned char>(name[0])) == 0 &&
         std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; });
}

// Shell helpers shared by the modules. $changed is set by a module that changed something; every step ends the
// module with status 1 on failure, and $why may say more on its failed line (the setup script's " (exit N)").
constexpr const char* kPrelude = R"sh(set -u
f="$HOME/.jobman/files"
jobman_verify() {
  [ "$(sha256sum < "$f/$1" 2>/dev/null | cut -c1-64)" = "${1%%-*}" ] && return 0
  echo "jobman: $f/$1 is missing or damaged; run the setup again to send it" >&2
  return 1
}
jobman_install() {
  jobman_verify "$1" || return 1
  if cmp -s "$f/$1" "$2" && [ "$(stat -c %a "$2")" = "$3" ]; then return 0; fi
  cp "$f/$1" "$2.jobman-tmp" && chmod "$3" "$2.jobman-tmp" && mv "$2.jobman-tmp" "$2" || return 1
  echo "installed $2"
  changed=1
}
jobman_append_once() {
  if [ -f "$1" ] && grep -qxF -- "$2" "$1"; then return 0; fi
  printf '%s\n' "$2" >> "$1" || return 1
  echo "added an entry to $1"
  changed=1
}
jobman_mode() {
  if [ "$(stat -c %a "$1")" != "$2" ]; then chmod "$2" "$1" || return 1; changed=1; fi
}
jobman_docker() {
  if docker info > /dev/null 2>&1; then D=docker; else D="sudo -n docker"; fi
}
jobman_run_module() {
  changed=0
  why=
  if "jobman_setup_$1"; then
    if [ "$changed" = 1 ]; then echo "jobman-setup: $1 changed"; else echo "jobman-setup: $1 unchanged"; fi
  else
    echo "jobman-setup: $1 failed$why"
    exit 1
  fi
}
)sh";

// A local file a module uses.
struct LocalFile {
  std::string what;        // Its config key: "venv.requirements_file".
  std::string local_path;  // Absolute.
  std::string remote_name; // Its name in ~/.jobman/files; empty when there is no such file on this machine.

  [[nodiscard]] bool missing() const { return remote_name.empty(); }
};

// Adds `file` to the plan's files unless a file of the same remote name (so the same content) is there already.
void add_once(SetupPlan& plan, const SetupFile& file) {
  const bool known = std::any_of(plan.files.begin(), plan.files.end(),
                                 [&](const SetupFile& f) { return f.remote_name == file.remote_name; });
  if (!known) {
    plan.files.push_back(file);
  }
}

// Adds a file made from `content` to the plan's files (once), as "<sha256>-<name>"; returns its remote name.
std::string add_text(SetupPlan& plan, const std::string& content, const std::string& name) {
  SetupFile file;
  file.sha256 = sha256_hex(content);
  file.remote_name = file.sha256 + "-" + name;
  file.content = content;
  add_once(plan, file);
  return file.remote_name;
}

// Adds `path` to the plan's files (once). A file that does not exist here is not sent: its module does without it
// on a worker that already has what the file would make (see without_file). A file that exists but cannot be read
// is an error.
LocalFile add_file(SetupPlan& plan, const std::string& path, const std::string& what) {
  const fs::path local = util::expand_user(path);
  LocalFile out{what, fs::absolute(local).string(), {}};
  std::error_code ec;
  if (!fs::exists(local, ec) && !ec) {
    return out;
  }
  std::string content;
  try {
    content = util::read_file(local);
  } catch (const Error& e) {
    throw Error(what + ": " + e.what());
  }
  SetupFile file;
  file.local_path = out.local_path;
  file.sha256 = sha256_hex(content);
  std::string base = local.filename().string();
  std::replace_if(
      base.begin(), base.end(),
      [](char c) { return std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '.' && c != '_' && c != '-'; }, '_');
  file.remote_name = file.sha256 + "-" + base;
  add_once(plan, file);
  out.remote_name = file.remote_name;
  return out;
}

// Shell text for a step that needs `file`, which does not exist here: where `present` (a shell test) holds on the
// worker, it says so and goes on (`instead` says with what); elsewhere it fails naming the file (`otherwise` says
// why it was needed). `instead` and `otherwise` are shell text inside double quotes.
std::string without_file(const LocalFile& file, const std::string& present, const std::string& instead,
                         const std::string& otherwise) {
  const auto named =
      "\"jobman: \"" + shell_quote(file.what + " " + file.local_path) + "\" does not exist on this machine";
  std::string s = "  if " + present + "; then\n";
  s += "    echo " + named + "; " + instead + "\"\n";
  s += "  else\n";
  s += "    echo " + named + ", " + otherwise + "\" >&2\n    return 1\n";
  s += "  fi\n";
  return s;
}

std::string ssh_module(SetupPlan& plan, const config::SshSection& ssh) {
  std::string body = "jobman_setup_ssh() {\n";
  body += "  [ -d \"$HOME/.ssh\" ] || { mkdir -p \"$HOME/.ssh\" && changed=1; } || return 1\n";
  body += "  jobman_mode \"$HOME/.ssh\" 700 || return 1\n";
  for (std::size_t i = 0; i < ssh.identities.size(); ++i) {
    const auto& identity = ssh.identities[i];
    const std::string where = "ssh.identities[" + std::to_string(i) + "]";
    const auto key_name = shell_quote(util::expand_user(identity.private_key).filename().string());
    const auto key = add_file(plan, identity.private_key, where + ".private_key");
    if (key.missing()) {
      // A key the worker has already (as an earlier setup left it) is kept.
      body += without_file(key, "[ -f \"$HOME/.ssh\"/" + key_name + " ]",
                           "keeping $HOME/.ssh/\"" + key_name + "\" on this worker",
                           "and this worker has no $HOME/.ssh/\"" + key_name + "\"");
      body += "  jobman_mode \"$HOME/.ssh\"/" + key_name + " 600 || return 1\n";
    } else {
      body += "  jobman_install " + shell_quote(key.remote_name) + " \"$HOME/.ssh\"/" + key_name + " 600 || return 1\n";
    }
    if (!identity.public_key.empty()) {
      const auto pub_name = shell_quote(util::expand_user(identity.public_key).filename().string());
      const auto pub = add_file(plan, identity.public_key, where + ".public_key");
      std::string pub_text;
      if (pub.missing()) {
        body += without_file(pub, "[ -f \"$HOME/.ssh\"/" + pub_name + " ]",
                             "keeping $HOME/.ssh/\"" + pub_name + "\" on this worker",
                             "and this worker has no $HOME/.ssh/\"" + pub_name + "\"");
        body += "  jobman_mode \"$HOME/.ssh\"/" + pub_name + " 644 || return 1\n";
        pub_text = "\"$HOME/.ssh\"/" + pub_name;
      } else {
        body +=
            "  jobman_install " + shell_quote(pub.remote_name) + " \"$HOME/.ssh\"/" + pub_name + " 644 || return 1\n";
        pub_text = "\"$f\"/" + shell_quote(pub.remote_name);
      }
      // The workers reach one another with this identity, so each accepts it.
      body += "  jobman_append_once \"$HOME/.ssh/authorized_keys\" \"$(cat " + pub_text + ")\" || return 1\n";
      body += "  jobman_mode \"$HOME/.ssh/authorized_keys\" 600 || return 1\n";
    }
    if (!util::trim(identity.config_entry).empty()) {
      // The entry goes in once, after a marker line naming its content.
      const std::string entry(util::trim(identity.config_entry));
      const auto marker = "# jobman " + sha256_hex(entry).substr(0, 16);
      body += "  if ! { [ -f \"$HOME/.ssh/config\" ] && grep -qxF " + shell_quote(marker) +
              " \"$HOME/.ssh/config\"; }; then\n";
      body += "    printf '\\n%s\\n%s\\n' " + shell_quote(marker) + " " + shell_quote(entry) +
              " >> \"$HOME/.ssh/config\" || return 1\n";
      body += "    echo \"added an entry to $HOME/.ssh/config\"; changed=1\n  fi\n";
      body += "  jobman_mode \"$HOME/.ssh/config\" 600 || return 1\n";
    }
  }
  body += "}\n";
  return body;
}

// The Python jobman's mount: every file and directory open to all, and metadata cached for as long as it is mounted.
constexpr const char* kPythonJobmanMountFlags =
    "--implicit-dirs --dir-mode=777 --file-mode=777 --kernel-list-cache-ttl-secs=-1 --metadata-cache-ttl-secs=-1 "
    "--stat-cache-max-size-mb=-1 --type-cache-max-size-mb=-1";

std::string gcsfuse_module(const config::GcsfuseSection& gcs) {
  // Without flags of its own, the mount is made as the Python jobman makes it.
  auto flags = gcs.flags.empty() ? " " + std::string(kPythonJobmanMountFlags) : quoted_words(gcs.flags);
  // Its metrics say what each attempt read (the cost of reading across regions); unless the flags choose a port.
  if (!gcs.flags_name_metrics_port()) {
    flags += " --prometheus-port=" + std::to_string(config::kGcsfuseMetricsPort);
  }
  std::string body = "jobman_setup_gcsfuse() {\n";
  body += "  mp=" + remote_path_expr(gcs.mount_path) + "\n";
  body += R"sh(  if mountpoint -q "$mp" 2> /dev/null; then
    if ls "$mp" > /dev/null 2>&1; then return 0; fi
    echo "$mp is a dead mount; mounting it again"
    fusermount -u "$mp" || return 1
  fi
  if ! command -v gcsfuse > /dev/null 2>&1; then
    command -v apt-get > /dev/null 2>&1 || { echo "gcsfuse is not installed and apt-get is not available" >&2; return 1; }
    codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
    echo "installing gcsfuse (gcsfuse-$codename)"
    curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | sudo -n tee /usr/share/keyrings/cloud.google.asc > /dev/null &&
      echo "deb [signed-by=/usr/share/keyrings/cloud.google.asc] https://packages.cloud.google.com/apt gcsfuse-$codename main" |
      sudo -n tee /etc/apt/sources.list.d/gcsfuse.list > /dev/null &&
      sudo -n apt-get update -q && sudo -n apt-get install -y -q gcsfuse || return 1
  fi
  mkdir -p "$mp" || return 1
)sh";
  body += "  gcsfuse" + flags + " " + shell_quote(gcs.bucket_name) + " \"$mp\" || return 1\n";
  body += "  echo \"mounted gs://\"" + shell_quote(gcs.bucket_name) + "\" on $mp\"\n  changed=1\n}\n";
  return body;
}

// The interpreter a venv is made with: "3.10" -> python3.10, "python3.9" as is; empty when the config names none.
std::string venv_python(const config::VenvSection& venv) {
  if (venv.python.empty()) {
    return "";
  }
  return venv.python.starts_with("python") ? venv.python : "python" + venv.python;
}

// Shell text setting `variable` to the venv's directory on a worker: ~/<name> when that holds a venv (as the Python
// jobman makes it), else ~/venvs/<name>.
std::string venv_dir_assignment(const config::VenvSection& venv, const std::string& variable) {
  const auto home_dir = "\"$HOME\"/" + shell_quote(venv.name);
  return variable + "=\"$HOME\"/venvs/" + shell_quote(venv.name) + "; if [ -f " + home_dir + "/bin/activate ]; then " +
         variable + "=" + home_dir + "; fi";
}

std::string venv_module(SetupPlan& plan, const config::VenvSection& venv) {
  const auto python = venv_python(venv);
  std::optional<LocalFile> requirements;
  if (!venv.requirements_file.empty()) {
    requirements = add_file(plan, venv.requirements_file, "venv.requirements_file");
  }
  std::string body = "jobman_setup_venv() {\n";
  body += "  " + venv_dir_assignment(venv, "dir") + "\n";
  if (requirements && requirements->missing()) {
    body += without_file(*requirements, "[ -f \"$dir/bin/activate\" ] && [ -x \"$dir/bin/python\" ]",
                         "using the venv $dir as it is", "and the venv $dir must be made from it");
    return body + "}\n";
  }
  const std::string remote = requirements ? requirements->remote_name : "";
  // What the venv was last set up from; a venv made from anything else is set up again.
  const auto wanted = sha256_hex(python + "\n" + remote).substr(0, 32);
  body += "  if [ -f \"$dir/bin/activate\" ] && [ -x \"$dir/bin/python\" ] && [ \"$(cat \"$dir/.jobman-setup\" 2> "
          "/dev/null)\" = " +
          wanted + " ]; then return 0; fi\n";
  if (python.empty()) {
    // The Python jobman's default, where the worker has it.
    body += "  py=python3.10; command -v \"$py\" > /dev/null 2>&1 || py=python3\n";
  } else {
    body += "  py=" + shell_quote(python) + "\n";
  }
  body += R"sh(  command -v "$py" > /dev/null 2>&1 || { echo "$py is not installed on this worker" >&2; return 1; }
  version='import sys; print("%d.%d" % sys.version_info[:2])'
  if [ -x "$dir/bin/python" ] && [ "$("$dir/bin/python" -c "$version")" != "$("$py" -c "$version")" ]; then
)sh";
  // A venv of jobman's own is made again; one found at ~/<name> is not jobman's to remove. Ubuntu's Pythons make
  // venvs only once their pythonX.Y-venv package is installed: when `-m venv` fails, that package is installed and
  // the venv made again. A venv that failed half-way (bin/python without bin/activate) is removed, so that no later
  // run takes it for a made one.
  body += "    if [ \"$dir\" = \"$HOME\"/venvs/" + shell_quote(venv.name) + " ]; then\n";
  body += R"sh(      echo "$dir was made with another Python; making it again"
      rm -rf "$dir"
    else
      echo "$dir was made with another Python than $py; using it as it is"
    fi
  fi
  if [ ! -f "$dir/bin/activate" ] || [ ! -x "$dir/bin/python" ]; then
    new=0; [ -e "$dir" ] || new=1
    if ! "$py" -m venv "$dir"; then
      [ $new = 0 ] || rm -rf "$dir"
      echo "installing $py-venv"
      sudo -n apt-get install -y "$py-venv" || { sudo -n apt-get update && sudo -n apt-get install -y "$py-venv"; } ||
        { echo "cannot install $py-venv, which $py needs to make a venv (sudo -n apt-get install -y $py-venv failed)" >&2; return 1; }
      if ! "$py" -m venv "$dir"; then [ $new = 0 ] || rm -rf "$dir"; return 1; fi
    fi
    echo "created $dir with $py"
  fi
)sh";
  if (requirements) {
    body += "  jobman_verify " + shell_quote(remote) + " || return 1\n";
    body += "  \"$dir/bin/python\" -m pip install -r \"$f\"/" + shell_quote(remote) + " || return 1\n";
  }
  body += "  echo " + wanted + " > \"$dir/.jobman-setup\" || return 1\n  changed=1\n}\n";
  return body;
}

// Shell text setting $conda to the conda program: the one on PATH, else $HOME/miniconda3/bin/conda, else
// $HOME/miniconda/bin/conda (where the Python jobman installs Miniconda); when there is none,
// $HOME/miniconda3/bin/conda, where the setup installs it.
constexpr const char* kFindConda =
    "conda=$(command -v conda 2> /dev/null) || { conda=\"$HOME/miniconda3/bin/conda\"; if [ ! -x \"$conda\" ] && [ -x "
    "\"$HOME/miniconda/bin/conda\" ]; then conda=\"$HOME/miniconda/bin/conda\"; fi; }";

// A recent conda uses the default channels only once their terms of service are accepted; an older one has no
// `tos` command, so a failure here is no failure.
constexpr const char* kAcceptTerms =
    "\"$conda\" tos accept --override-channels -c https://repo.anaconda.com/pkgs/main -c "
    "https://repo.anaconda.com/pkgs/r > /dev/null 2>&1 || true";

std::string conda_module(SetupPlan& plan, const config::CondaSection& conda) {
  std::optional<LocalFile> file;
  if (!conda.config_file.empty()) {
    file = add_file(plan, conda.config_file, "conda.config_file");
  }
  const auto name = shell_quote(conda.name);
  const auto listed = "\"$conda\" env list | awk '!/^#/ {print $1}' | grep -qxF -- " + name;
  const auto marker = "\"$HOME\"/.jobman/conda-" + shell_quote(sha256_hex(conda.name).substr(0, 16));
  std::string body = "jobman_setup_conda() {\n";
  body += std::string("  ") + kFindConda + "\n";
  if (file && file->missing()) {
    body +=
        without_file(*file, "[ -x \"$conda\" ] && " + listed, "using the conda environment \"" + name + "\" as it is",
                     "and the conda environment \"" + name + "\" must be created from it");
    return body + "}\n";
  }
  body += R"sh(  if [ ! -x "$conda" ]; then
    echo "installing Miniconda in $HOME/miniconda3"
    installer="$HOME/.jobman/miniconda.sh"
    curl -fsSL "https://repo.anaconda.com/miniconda/Miniconda3-latest-Linux-$(uname -m).sh" -o "$installer" &&
      bash "$installer" -b -p "$HOME/miniconda3" && rm -f "$installer" || return 1
    changed=1
  fi
)sh";
  body += "  exists=0; " + listed + " && exists=1\n";
  if (!file) {
    body += "  [ $exists = 1 ] && return 0\n";
    body += "  echo \"conda environment \"" + name +
            "\" does not exist on this worker and conda.config_file is not set\" >&2\n  return 1\n}\n";
    return body;
  }
  const auto& remote = file->remote_name;
  body +=
      "  [ $exists = 1 ] && [ \"$(cat " + marker + " 2> /dev/null)\" = " + remote.substr(0, 64) + " ] && return 0\n";
  body += "  jobman_verify " + shell_quote(remote) + " || return 1\n";
  body += std::string("  ") + kAcceptTerms + "\n";
  body += "  if [ $exists = 1 ]; then \"$conda\" env update -n " + name + " -f \"$f\"/" + shell_quote(remote) +
          " --prune || return 1\n";
  body += "  else \"$conda\" env create -n " + name + " -f \"$f\"/" + shell_quote(remote) + " || return 1; fi\n";
  body += "  echo " + remote.substr(0, 64) + " > " + marker + " || return 1\n  changed=1\n}\n";
  return body;
}

std::string docker_module(const config::DockerSection& docker) {
  const auto image = shell_quote(docker.image);
  std::string body = "jobman_setup_docker() {\n";
  body +=
      "  command -v docker > /dev/null 2>&1 || { echo \"docker is not installed on this worker\" >&2; return 1; }\n";
  body += "  jobman_docker\n";
  body += "  $D image inspect " + image + " > /dev/null 2>&1 && return 0\n";
  body += "  $D pull " + image + " || return 1\n  changed=1\n}\n";
  return body;
}

// The user's setup.script (the Python jobman-lite's `worker start --startup-script`): sent as a file and run last, with
// bash, from the home directory, with nothing on its stdin, in the job's environment: the venv activated, or through
// `conda run`. With docker it runs on the host, not in a container (the command's container exists only while the
// command runs), so it can prepare what the container mounts. It is the user's to make idempotent: it runs at every
// setup and reports changed, or failed with its exit status.
std::string script_module(SetupPlan& plan, const config::JobConfig& config) {
  const auto remote = add_text(plan, config.setup->script, "setup-script.sh");
  const auto file = "\"$f\"/" + shell_quote(remote);
  std::string body = "jobman_setup_script() {\n";
  body += "  jobman_verify " + shell_quote(remote) + " || return 1\n";
  std::string run = "exec bash " + file;
  if (config.job.env_type == config::EnvType::venv && config.venv) {
    body += "  " + venv_dir_assignment(*config.venv, "dir") + "\n";
    body += "  [ -f \"$dir/bin/activate\" ] || { echo \"there is no venv at $dir to run setup.script in\" >&2; return "
            "1; }\n";
    run = "set +u; . \"$dir/bin/activate\" || exit 1; " + run;
  } else if (config.job.env_type == config::EnvType::conda && config.conda) {
    body += std::string("  ") + kFindConda + "\n";
    run = "exec \"$conda\" run --no-capture-output -n " + shell_quote(config.conda->name) + " bash " + file;
  }
  body += "  echo \"running setup.script\"\n";
  body += "  ( cd \"$HOME\" || exit 1; " + run + " ) < /dev/null\n";
  body += R"sh(  status=$?
  if [ "$status" != 0 ]; then
    echo "jobman: setup.script exited with status $status" >&2
    why=" (exit $status)"
    return 1
  fi
  changed=1
}
)sh";
  return body;
}

} // namespace

std::string remote_path_expr(const std::string& path) {
  if (path == "~") {
    return "\"$HOME\"";
  }
  if (path.starts_with("~/")) {
    return "\"$HOME\"/" + shell_quote(path.substr(2));
  }
  return shell_quote(path);
}

SetupPlan plan_setup(const config::JobConfig& config) {
  SetupPlan plan;
  std::string functions;
  if (config.ssh) {
    plan.modules.emplace_back("ssh");
    functions += ssh_module(plan, *config.ssh);
  }
  if (config.gcsfuse) {
    plan.modules.emplace_back("gcsfuse");
    functions += gcsfuse_module(*config.gcsfuse);
  }
  switch (config.job.env_type) {
  case config::EnvType::venv:
    if (config.venv) {
      plan.modules.emplace_back("venv");
      functions += venv_module(plan, *config.venv);
    }
    break;
  case config::EnvType::conda:
    if (config.conda) {
      plan.modules.emplace_back("conda");
      functions += conda_module(plan, *config.conda);
    }
    break;
  case config::EnvType::docker:
    if (config.docker) {
      plan.modules.emplace_back("docker");
      functions += docker_module(*config.docker);
    }
    break;
  case config::EnvType::none: break;
  }
  // Last: the user's script runs once the worker has everything else.
  if (config.setup) {
    plan.modules.emplace_back("script");
    functions += script_module(plan, config);
  }
  plan.script = std::string(kPrelude) + functions;
  for (const auto& module : plan.modules) {
    plan.script += "jobman_run_module " + module + "\n";
  }
  return plan;
}

std::string to_string(ModuleOutcome outcome) {
  switch (outcome) {
  case ModuleOutcome::unchanged: return "unchanged";
  case ModuleOutcome::changed: return "changed";
  case ModuleOutcome::failed: return "failed";
  }
  return "failed";
}

bool WorkerSetup::changed() const {
  return !uploaded.empty() || std::any_of(modules.begin(), modules.end(),
                                          [](const ModuleResult& m) { return m.outcome != ModuleOutcome::unchanged; });
}

namespace {

// The check step: makes ~/.jobman/files (private) and names each needed file that is missing or damaged.
std::string check_script(const SetupPlan& plan) {
  std::string s = "f=\"$HOME/.jobman/files\"\n[ -d \"$f\" ] || mkdir -p -m 700 \"$f\" || exit 1\n";
  s += "[ -d \"$f\" ] && echo jobman-files-ready\n";
  for (const auto& file : plan.files) {
    s += "[ \"$(sha256sum < \"$f\"/" + shell_quote(file.remote_name) +
         " 2> /dev/null | cut -c1-64)\" = " + file.sha256 + " ] || echo jobman-missing " +
         shell_quote(file.remote_name) + "\n";
  }
  return s;
}

// The module and outcome a "jobman-setup: MODULE OUTCOME" line reports (words after the outcome, such as the setup
// script's "(exit N)", aside); nullopt for any other line.
std::optional<ModuleResult> module_report(const std::string& line) {
  if (!line.starts_with("jobman-setup: ")) {
    return std::nullopt;
  }
  const auto words = util::split(line.substr(14), ' ');
  if (words.size() < 2 || words[0].empty()) {
    return std::nullopt;
  }
  const auto outcome = words[1] == "unchanged" ? ModuleOutcome::unchanged
                       : words[1] == "changed" ? ModuleOutcome::changed
                                               : ModuleOutcome::failed;
  return ModuleResult{words[0], outcome};
}

// The last lines of `output` (at most `count`), joined with "; ", for a one-sentence error.
std::string tail_lines(const std::string& output, std::size_t count) {
  std::vector<std::string> lines;
  for (const auto& line : util::split(output, '\n')) {
    if (!util::trim(line).empty() && !line.starts_with("jobman-setup: ")) {
      lines.emplace_back(util::trim(line));
    }
  }
  const auto first = lines.size() > count ? lines.end() - static_cast<std::ptrdiff_t>(count) : lines.begin();
  return util::join(std::vector<std::string>(first, lines.end()), "; ");
}

// Appends to a worker's setup log, which only its owner may read (setup output can show secrets).
class SetupLog {
public:
  explicit SetupLog(const fs::path& path) : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) {
    if (fd_ < 0) {
      throw Error("cannot write " + path.string() + ": " + std::strerror(errno));
    }
  }
  SetupLog(const SetupLog&) = delete;
  SetupLog& operator=(const SetupLog&) = delete;
  ~SetupLog() { ::close(fd_); }
  void write(const std::string& text) {
    std::string out = text;
    if (!out.empty() && !out.ends_with('\n')) {
      out += '\n';
    }
    std::size_t done = 0;
    while (done < out.size()) {
      const auto n = ::write(fd_, out.data() + done, out.size() - done);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        return; // A full disk loses log lines, never the setup.
      }
      done += static_cast<std::size_t>(n);
    }
  }

private:
  int fd_;
};

// A directory of links named by the files' remote names (and of the files made from text, written there), so that one
// scp per worker sends them under those names. Removed with the object.
class UploadStage {
public:
  UploadStage(const fs::path& attempt_dir, const std::vector<SetupFile>& files)
      : dir_(attempt_dir / (".upload-" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    util::ensure_directory(dir_, 0700);
    for (const auto& file : files) {
      if (file.local_path.empty()) {
        util::write_file_atomic(dir_ / file.remote_name, file.content, 0600);
      } else {
        fs::create_symlink(file.local_path, dir_ / file.remote_name);
      }
    }
  }
  UploadStage(const UploadStage&) = delete;
  UploadStage& operator=(const UploadStage&) = delete;
  ~UploadStage() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  [[nodiscard]] std::string path(const std::string& remote_name) const { return (dir_ / remote_name).string(); }

private:
  fs::path dir_;
};

} // namespace

std::vector<WorkerSetup> run_setup(const SliceTarget& target, const std::vector<int>& workers, const SetupPlan& plan,
                                   const fs::path& attempt_dir, std::chrono::milliseconds timeout) {
  util::ensure_directory(attempt_dir, 0700);
  std::map<int, WorkerSetup> results;
  std::map<int, std::unique_ptr<SetupLog>> logs;
  for (int worker : workers) {
    results[worker].worker = worker;
    logs[worker] = std::make_unique<SetupLog>(attempt_dir / ("setup-" + std::to_string(worker) + ".log"));
    logs[worker]->write("== setup " + util::format_utc(util::now_ms()) + " (" +
                        (plan.modules.empty() ? std::string("no modules") : util::join(plan.modules, ", ")) + ") ==");
  }
  auto fail = [&](WorkerSetup& result, const WorkerRun& run, const std::string& step) {
    result.exit_code = run.exit_code;
    result.timed_out = run.timed_out;
    const auto detail = tail_lines(run.output, 3);
    result.error = step + (run.timed_out ? " timed out" : " failed (exit " + std::to_string(run.exit_code) + ")") +
                   (detail.empty() ? "" : ": " + detail);
  };

  // 1. Which files does each worker lack? Without files to send there is nothing to ask: the modules' own session is
  // the first, and a session costs a worker tens of milliseconds of CPU.
  std::vector<int> reachable = plan.files.empty() ? workers : std::vector<int>{};
  std::vector<Upload> uploads;
  const auto checked =
      plan.files.empty() ? std::vector<WorkerRun>{} : run_on_workers(target, workers, check_script(plan), timeout);
  for (const auto& run : checked) {
    auto& result = results[run.worker];
    if (run.exit_code != 0 || run.output.find("jobman-files-ready") == std::string::npos) {
      logs[run.worker]->write(run.output);
      fail(result, run, "checking worker " + std::to_string(run.worker));
      continue;
    }
    Upload upload{run.worker, {}};
    for (const auto& line : util::split(run.output, '\n')) {
      if (line.starts_with("jobman-missing ")) {
        result.uploaded.push_back(line.substr(15));
      }
    }
    reachable.push_back(run.worker);
    uploads.push_back(upload);
  }

  // 2. Send them, one scp per worker.
  if (!plan.files.empty()) {
    const UploadStage stage(attempt_dir, plan.files);
    for (auto& upload : uploads) {
      for (const auto& name : results[upload.worker].uploaded) {
        upload.sources.push_back(stage.path(name));
      }
    }
    for (const auto& run : copy_to_workers(target, uploads, ".jobman/files", timeout)) {
      auto& result = results[run.worker];
      logs[run.worker]->write("sent " + util::join(result.uploaded, ", ") + "\n" + run.output);
      if (run.exit_code != 0) {
        fail(result, run, "sending files to worker " + std::to_string(run.worker));
        std::erase(reachable, run.worker);
      }
    }
  }

  // 3. Run the modules.
  if (!plan.modules.empty()) {
    for (const auto& run : run_on_workers(target, reachable, plan.script, timeout)) {
      auto& result = results[run.worker];
      logs[run.worker]->write(run.output);
      result.exit_code = run.exit_code;
      // Each module reports once, in the plan's order. The setup script, the last module, runs the user's text, whose
      // output may hold lines that look like reports: those naming another module are ignored, and the module's own
      // report, which comes after them, replaces any naming it.
      for (const auto& line : util::split(run.output, '\n')) {
        const auto report = module_report(line);
        if (!report) {
          continue;
        }
        auto& done = result.modules;
        if (done.size() == plan.modules.size() && !done.empty() && done.back().module == report->module) {
          done.back() = *report;
        } else if (done.size() < plan.modules.size() && plan.modules[done.size()] == report->module) {
          done.push_back(*report);
        }
      }
      if (run.exit_code != 0 || result.modules.size() != plan.modules.size()) {
        const auto module = !result.modules.empty() && result.modules.back().outcome == ModuleOutcome::failed
                                ? result.modules.back().module + " setup"
                                : std::string("setup");
        fail(result, run, module + " on worker " + std::to_string(run.worker));
      }
    }
  }
  std::vector<WorkerSetup> out;
  out.reserve(workers.size());
  for (int worker : workers) {
    logs[worker]->write(results[worker].ok() ? "== setup done ==" : "== setup failed: " + results[worker].error);
    out.push_back(std::move(results[worker]));
  }
  return out;
}

std::string environment_command(const config::JobConfig& config, const std::string& command) {
  switch (config.job.env_type) {
  case config::EnvType::none: return command;
  case config::EnvType::venv:
    if (!config.venv) {
      return command;
    }
    return venv_dir_assignment(*config.venv, "jobman_venv") + "\n. \"$jobman_venv/bin/activate\" || exit 1\n" + command;
  case config::EnvType::conda:
    if (!config.conda) {
      return command;
    }
    return std::string(kFindConda) + "\nexec \"$conda\" run --no-capture-output -n " + shell_quote(config.conda->name) +
           " bash -c " + shell_quote(command) + "\n";
  case config::EnvType::docker: {
    if (!config.docker) {
      return command;
    }
    const auto& docker = *config.docker;
    std::string prelude = "if docker info > /dev/null 2>&1; then D=docker; else D=\"sudo -n docker\"; fi\n";
    std::string run = "exec $D run --rm --name \"$JOBMAN_CONTAINER\"";
    for (const char* name :
         {"JOBMAN_JOB_ID", "JOBMAN_ATTEMPT", "JOBMAN_RESUME", "JOBMAN_WORKER_ID", "JOBMAN_NUM_WORKERS",
          "JOBMAN_SLICE_ID", "JOBMAN_NUM_SLICES", "JOBMAN_TPU_NAME", "JOBMAN_ZONE", "JOBMAN_ACCELERATOR",
          "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID", "MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_PORT"}) {
      run += std::string(" -e ") + name;
    }
    // NAME=value entries go through a file beside run.sh ($0), not docker's arguments: they may hold secrets. A NAME
    // alone passes the variable on from the worker's environment (-e NAME).
    std::string lines;
    for (const auto& variable : docker.env_vars) {
      const auto eq = variable.find('=');
      if (variable.find('\n') != std::string::npos || (eq == std::string::npos && !is_variable_name(variable))) {
        throw Error("docker.env_vars: '" + variable.substr(0, variable.find('\n')) +
                    "' is not one line of the form NAME=value, nor a variable name (letters, digits and '_', not "
                    "starting with a digit)");
      }
      if (eq == std::string::npos) {
        run += " -e " + variable;
      } else {
        lines += variable + "\n";
      }
    }
    if (!lines.empty()) {
      prelude += "jobman_env_file=\"$(dirname \"$0\")/docker.env\"\n";
      prelude += "(umask 077 && printf '%s' " + shell_quote(lines) + " > \"$jobman_env_file\") || exit 1\n";
      run += " --env-file \"$jobman_env_file\"";
    }
    for (const auto& dir : docker.mount_dirs) {
      run += " -v " + shell_quote(std::string(dir).append(":").append(dir));
    }
    if (!docker.workdir.empty()) {
      run += " -w " + shell_quote(docker.workdir);
    }
    // The flags are shell text, as the Python jobman put them in its command: the worker's shell quotes and expands
    // them ("-e 'A=b c'", "-v $HOME/data:/data").
    for (const auto& flag : docker.flags) {
      const auto text = util::trim(flag);
      if (text.find('\n') != std::string::npos) {
        throw Error("docker.flags: '" + std::string(text.substr(0, text.find('\n'))) + "' is not one line");
      }
      if (!text.empty()) {
        run += " " + std::string(text);
      }
    }
    run += " " + shell_quote(docker.image) + " bash -c " + shell_quote(command) + "\n";
    return prelude + run;
  }
  }
  return command;
}

} // namespace jobman::remote
