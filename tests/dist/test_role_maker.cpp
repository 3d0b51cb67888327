// Tests of oar/dist/role_maker.hpp: the parameter-server roles read from the launcher's
// environment (OAR_SERVER_NUM / OAR_WORKER_NUM or Paddle's names), and the usage_errors that name
// the variable when the configuration is wrong.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/dist/role_maker.hpp>  // the header under test

#include <cstdlib>  // setenv, unsetenv, getenv
#include <map>      // std::map: saved variables
#include <string>   // std::string

namespace {

/// Sets (or, for null, unsets) the variables for the scope, restoring what was there.
class ScopedEnv {
public:
    ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
        for (const auto& [k, v] : vars) {
            const char* old = std::getenv(k);
            saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
            if (v) ::setenv(k, v, 1);
            else ::unsetenv(k);
        }
    }
    ~ScopedEnv() {
        for (const auto& [k, v] : saved_) {
            if (v) ::setenv(k.c_str(), v->c_str(), 1);
            else ::unsetenv(k.c_str());
        }
    }

private:
    std::map<std::string, std::optional<std::string>> saved_;
};

std::string error_of(int world, std::optional<int> rank) {
    try {
        (void)oar::dist::ps_role_from_env(world, rank);
    } catch (const oar::usage_error& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("role maker: trainers are ranks 0..W-1, servers W..W+S-1") {
    ScopedEnv env{{"OAR_SERVER_NUM", "2"}, {"OAR_WORKER_NUM", "3"}, {"PADDLE_PSERVER_NUM", nullptr},
                  {"PADDLE_TRAINERS_NUM", nullptr}};
    CHECK(oar::dist::ps_mode_requested());
    for (int r = 0; r < 5; ++r) {
        const oar::dist::PsRole role = oar::dist::ps_role_from_env(5, r);
        CHECK(role.servers == 2);
        CHECK(role.trainers == 3);
        CHECK(role.is_worker() == (r < 3));
        CHECK(role.is_server() == (r >= 3));
        CHECK(role.index() == (r < 3 ? r : r - 3));
    }
    const oar::dist::PsRole role = oar::dist::ps_role_from_env(5, 0);
    CHECK(role.server_rank(0) == 3);
    CHECK(role.server_rank(1) == 4);
    CHECK(role.trainer_rank(2) == 2);
}

TEST_CASE("role maker: Paddle's variable names are read too") {
    ScopedEnv env{{"OAR_SERVER_NUM", nullptr}, {"OAR_WORKER_NUM", nullptr}, {"PADDLE_PSERVER_NUM", "1"},
                  {"PADDLE_TRAINERS_NUM", "2"}};
    CHECK(oar::dist::ps_mode_requested());
    const oar::dist::PsRole role = oar::dist::ps_role_from_env(3, 2);
    CHECK(role.is_server());
    CHECK(role.index() == 0);
}

TEST_CASE("role maker: a bad configuration is a usage_error naming the variable") {
    {
        ScopedEnv env{{"OAR_SERVER_NUM", "1"}, {"OAR_WORKER_NUM", "2"}};
        CHECK(error_of(4, 0) == "oar: OAR_SERVER_NUM=1 + OAR_WORKER_NUM=2 = 3 processes, but the launcher started 4: "
                                "start S + W ranks (oar-launch --server_num 1 --worker_num 2)");
    }
    {
        ScopedEnv env{{"OAR_SERVER_NUM", "0"}, {"OAR_WORKER_NUM", "2"}};
        CHECK(error_of(2, 0) == "oar: OAR_SERVER_NUM='0' is not a positive number of processes (set by oar-launch "
                                "--server_num / --worker_num)");
    }
    {
        ScopedEnv env{{"OAR_SERVER_NUM", "1"}, {"OAR_WORKER_NUM", "2x"}};
        CHECK(error_of(3, 0).find("OAR_WORKER_NUM='2x' is not a positive number") != std::string::npos);
    }
    {
        ScopedEnv env{{"OAR_SERVER_NUM", "1"}, {"OAR_WORKER_NUM", nullptr}, {"PADDLE_TRAINERS_NUM", nullptr}};
        CHECK(error_of(3, 0) == "oar: parameter-server mode needs OAR_WORKER_NUM (or PADDLE_TRAINERS_NUM): start the "
                                "job with oar-launch --server_num S --worker_num W");
    }
    {
        ScopedEnv env{{"OAR_SERVER_NUM", "1"}, {"OAR_WORKER_NUM", "1"}, {"OMPI_COMM_WORLD_RANK", nullptr},
                      {"PMI_RANK", nullptr}, {"PMIX_RANK", nullptr}};
        CHECK(error_of(0, std::nullopt).find("no launcher started this process") != std::string::npos);
    }
    {
        ScopedEnv env{{"OAR_SERVER_NUM", nullptr}, {"OAR_WORKER_NUM", nullptr}, {"PADDLE_PSERVER_NUM", nullptr}};
        CHECK_FALSE(oar::dist::ps_mode_requested());
    }
}
