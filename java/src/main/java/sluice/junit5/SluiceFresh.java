package sluice.junit5;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * On a test method (or a test class, for each of its tests): the test gets a sluice process
 * of its own, started before it and killed after it, instead of the class's shared server
 * reset with {@code TESTMODE RESET}. For tests that need the process itself: they stop it,
 * restart it, or watch it exit. It costs a few milliseconds per test (a start, a connection,
 * a kill), where the shared server costs one round trip.
 */
@Documented
@Inherited
@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.METHOD, ElementType.TYPE})
public @interface SluiceFresh {
}
