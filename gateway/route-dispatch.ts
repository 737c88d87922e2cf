// The route table's dispatch. @koa/router's own middleware, on every request, reads the Host
// header, tests every layer, builds a middleware chain for the matched ones and composes it: on
// Track that was 4 % of the gateway's thread, more than the key check. Every route here has one
// handler (a check chain), so the dispatch is a walk over the table's own layers: each layer's
// regexp (@koa/router's, from path-to-regexp with the router's options) is run once on the path,
// and @koa/router's Layer decodes the params from its captures; the first route whose method and
// path match runs. Anything else goes on to `next` (the 404).
import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { IngestState } from './state.ts';

type Layer = Router<IngestState>['stack'][number];

interface Route {
  layer: Layer;
  methods: ReadonlySet<string>;
  handler: Middleware<IngestState>;
}

/** Koa middleware running `router`'s routes; each must have exactly one handler. */
export function dispatchRoutes(router: Router<IngestState>): Middleware<IngestState> {
  const table: Route[] = router.stack.map((layer) => {
    if (layer.stack.length !== 1) throw new Error(`route ${layer.name ?? layer.path} must have one handler`);
    return { layer, methods: new Set(layer.methods), handler: layer.stack[0] as Middleware<IngestState> };
  });
  return function routes(ctx, next) {
    const path = ctx.path;
    const method = ctx.method;
    for (const { layer, methods, handler } of table) {
      if (!methods.has(method)) continue;
      const match = layer.regexp.exec(path);
      if (match === null) continue;
      const routed = ctx as typeof ctx & { params: Record<string, string>; _matchedRoute: string; _matchedRouteName?: string };
      routed.params = layer.params(path, match.slice(1), {});
      routed._matchedRoute = layer.path as string;
      if (layer.name) routed._matchedRouteName = layer.name;
      return handler(ctx, next);
    }
    return next();
  };
}
