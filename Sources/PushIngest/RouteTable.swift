public import HTTPTypes

/// The paths push-ingest serves and the methods each takes. The router is built from it, and a known
/// path asked with another method is answered `405` with `Allow` from it (RFC 9110), not `404`: a
/// client that sent `POST` where `PUT` belongs learns which methods the path has.
public struct RouteTable: Sendable {
    /// One route: a method and a path template whose `{name}` components match one path component.
    public struct Route: Sendable {
        public let method: HTTPRequest.Method
        public let template: String
        fileprivate let components: [Substring]

        public init(_ method: HTTPRequest.Method, _ template: String) {
            self.method = method
            self.template = template
            self.components = template.split(separator: "/")
        }

        /// Whether `path` (no query) has this route's shape.
        fileprivate func matches(_ path: [Substring]) -> Bool {
            guard path.count == components.count else { return false }
            return zip(components, path).allSatisfy { template, component in
                template.hasPrefix("{") && template.hasSuffix("}") ? !component.isEmpty : template == component
            }
        }
    }

    public private(set) var routes: [Route]

    public init(_ routes: [Route] = []) {
        self.routes = routes
    }

    public mutating func add(_ method: HTTPRequest.Method, _ template: String) {
        routes.append(Route(method, template))
    }

    /// The methods `path` is served with, in the order they were added; empty when no route has
    /// this path's shape (then the answer is `404`). Empty components are skipped, as the router
    /// skips them (`/register/` is `/register`).
    public func methods(forPath path: String) -> [HTTPRequest.Method] {
        let components = path.split(separator: "/")
        var methods: [HTTPRequest.Method] = []
        for route in routes where route.matches(components) && !methods.contains(route.method) {
            methods.append(route.method)
        }
        return methods
    }
}
