// The OpenSSH server on each of the mock's worker hosts, as a TPU VM runs one: Debian's sshd, started on the host's
// own filesystem (host_filesystem.hpp) with its own hostname, listening only on the host's loopback addresses, and
// the accounts and authorized keys Google's guest agent would make from the `ssh-keys` metadata.
//
// Each host keeps these under its sandbox DIR, which its sessions see at the same path:
//   DIR/.mock/ssh/       sshd_config, the host key (ssh_host_ed25519_key) and sshd.log
//   DIR/.mock/accounts/  passwd, group and shadow, bound over the host's /etc ones
//   DIR/.mock/keys/USER  USER's authorized keys (what sshd's AuthorizedKeysCommand reads)
//   DIR/homes/USER       USER's home, /home/USER on the host
#pragma once

#include "mock_cloud/world.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <sys/types.h>
#include <vector>

namespace jobman::mock::host_sshd {

// First uid (and gid) of the accounts the hosts make: far above this machine's own users, since a host's processes
// run as these ids on this machine's kernel.
inline constexpr uid_t kFirstAccountId = 1'000'000;

// One worker host's SSH server, as it is started.
struct SshHost {
  std::filesystem::path dir;                         // The host's sandbox.
  std::string hostname;                              // Its hostname.
  std::vector<std::string> addresses;                // Where sshd listens: the internal and the external address.
  int port = 22;                                     // On which port.
  std::map<std::string, std::string> env;            // The environment sshd itself starts with (the host's marker).
  std::map<std::string, std::string> session_env;    // What every session gets (sshd's SetEnv).
  std::vector<std::filesystem::path> keep;           // The mock's directories the host writes to.
  std::vector<std::filesystem::path> keep_read_only; // The mock's directories the host only reads.
  std::filesystem::path gcs;                         // The mock's buckets, also at /run/mock-gcs on the host.
};

// Where sessions find the mock's buckets on a host (MOCK_GCS_ROOT there) and the host's sandbox
// (MOCK_TPU_WORKER_DIR there).
inline constexpr const char* kHostGcsPath = "/run/mock-gcs";
inline constexpr const char* kHostSandboxPath = "/run/mock-host";

// The host's public key ("ssh-ed25519 BASE64"), made with `keygen` (ssh-keygen) the first time. Throws
// jobman::Error when ssh-keygen fails.
std::string ensure_host_key(const std::filesystem::path& keygen, const SshHost& host);

// Makes what `keys` need on the host, as the guest agent does: an account (with uid and gid from kFirstAccountId)
// and a home (DIR/homes/USER) for each user that has none yet (as a mock run by another user than root, only that
// user's), and each user's authorized keys; a user without keys any more loses the file, so a removed key stops working
// at once. Accounts are only ever added, and the account files are appended to, never replaced: sshd reads them through
// a bind mount of these very files.
void sync_accounts(const SshHost& host, const std::vector<SshKey>& keys);

// Writes the host's sshd_config (DIR/.mock/ssh/sshd_config).
void write_config(const SshHost& host);

// Listens on each of the host's addresses at its port (non-blocking sockets, close-on-exec); returns the sockets.
// Throws jobman::Error, naming the address, when one cannot be bound; none is left open then.
std::vector<int> listen_on(const SshHost& host);

// Serves one connection, accepted on a socket of listen_on, as inetd would: `sshd -i` on the host's own filesystem,
// entered through `host_login` (jobman-mock-host-login), with the connection as its stdin and stdout and its log
// appended to DIR/.mock/ssh/sshd.log. Returns its pid; the caller closes `connection` and reaps the child.
//
// The mock listens, not sshd: a server in the host's user namespace may not bind port 22.
pid_t serve_connection(const std::filesystem::path& sshd, const std::filesystem::path& host_login, const SshHost& host,
                       int connection);

// True once a connection to address:port is accepted, polling until `limit`.
bool await_listening(const std::string& address, int port, std::chrono::milliseconds limit);

// True when address:port can be bound: nothing listens there.
bool port_free(const std::string& address, int port);

// A free TCP port on 127.0.0.1, for a mock that may not bind port 22.
int free_port();

} // namespace jobman::mock::host_sshd
