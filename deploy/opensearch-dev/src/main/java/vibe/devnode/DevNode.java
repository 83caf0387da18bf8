package vibe.devnode;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.opensearch.analysis.common.CommonAnalysisPlugin;
import org.opensearch.cluster.service.ClusterService;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.http.HttpServerTransport;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.plugins.Plugin;
import org.opensearch.transport.Netty4Plugin;

/**
 * Starts one OpenSearch node with the two modules vibe-semantic needs, on loopback.
 *
 * <p>Building {@link Node} directly skips OpenSearch's Bootstrap: no refusal to run as root
 * (CI and dev containers are root), no jar-hell check, no security manager and no production
 * bootstrap checks (vm.max_map_count, file descriptors), none of which a loopback node needs.
 *
 * <p>Usage: {@code DevNode <home> [httpPort]}. Port 0 picks a free one; the bound address is
 * printed as {@code OPENSEARCH_HTTP http://host:port} and written to {@code <home>/logs/http.ports}.
 * SIGTERM (or Ctrl-C) closes the node cleanly.
 */
public final class DevNode {
  private DevNode() {}

  static final class PluginNode extends Node {
    PluginNode(Environment env, Collection<Class<? extends Plugin>> plugins) {
      super(env, plugins, true);
    }

    // The node-id listener only feeds log context, and it needs the logging setup that
    // Bootstrap would have done.
    @Override
    protected void configureNodeAndClusterIdStateListener(ClusterService clusterService) {}
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: DevNode <home> [httpPort]");
      System.exit(2);
    }
    Path home = Paths.get(args[0]).toAbsolutePath();
    String httpPort = args.length > 1 ? args[1] : "9200";
    for (String d : List.of("config", "data", "logs")) {
      Files.createDirectories(home.resolve(d));
    }
    Settings settings =
        Settings.builder()
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("cluster.name", "vibe-dev")
            .put("node.name", "vibe-dev-0")
            .put("discovery.type", "single-node")
            .put("network.host", "127.0.0.1")
            .put("http.port", httpPort)
            .put("transport.port", "0")
            .put("node.portsfile", true)
            // A nearly full laptop disk would otherwise turn every index read-only (flood stage).
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            // The adapter drops a tenant's indexes by prefix.
            .put("action.destructive_requires_name", false)
            .build();
    Environment env =
        InternalSettingsPreparer.prepareEnvironment(
            settings, Collections.emptyMap(), home.resolve("config"), () -> "vibe-dev-0");
    Node node = new PluginNode(env, List.of(Netty4Plugin.class, CommonAnalysisPlugin.class));
    CountDownLatch closed = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  try {
                    node.close();
                    node.awaitClose(30, TimeUnit.SECONDS);
                  } catch (Exception e) {
                    e.printStackTrace();
                  }
                  closed.countDown();
                }));
    node.start();
    HttpServerTransport http = node.injector().getInstance(HttpServerTransport.class);
    System.out.println("OPENSEARCH_HTTP http://" + http.boundAddress().publishAddress());
    System.out.flush();
    closed.await();
  }
}
